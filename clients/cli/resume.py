"""``loom resume RUN``: continue an interrupted run under its own id, without a new message.

When a daemon runs for ``$LOOM_HOME`` the run is resumed there, so every attached client sees it and can
answer a review (``loom approve`` / ``loom deny``). Otherwise it is resumed behind a face in this process,
headless like ``loom run``: a call that would need a review ends the run ``needs_review`` with nothing run
again. Either way the run's events are rendered as ``loom run`` renders them (``--json``: NDJSON).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from clients.cli.exits import EXIT_FAILED
from clients.cli.render import JsonRenderer, TerminalRenderer
from orchestrator.events import ApprovalRequested, Event, RunResumed

if TYPE_CHECKING:
    from clients.loom import LoomClient


def resume(args: argparse.Namespace) -> int:
    """``loom resume RUN [--json]``: exit 0 when the run completes, 130 cancelled, 1 otherwise (2: cannot resume)."""
    from clients.cli.commands import quiet_logging
    from clients.cli.driving import EXIT_CODES, fail, watch_run, with_client
    from clients.loom import daemon_running
    from orchestrator.config import loom_home
    from orchestrator.store import peek

    quiet_logging()
    render: Callable[[Event], None] = JsonRenderer() if args.json else TerminalRenderer()

    def renderer(event: Event) -> None:
        render(event)
        _hint(event)

    home = loom_home()
    try:
        location = peek.store_location(home)  # the dbos engine's database, else the file under the home
    except peek.ReadFailed as exc:
        return fail(str(exc))
    if not daemon_running(home) and not isinstance(location, str) and not location.is_file():
        return fail(f"no run {args.run_id!r} in {home}; `loom runs` lists them")  # reading must not create a file

    async def main(client: LoomClient) -> int:
        before = await client.get_run(args.run_id)
        cursor = (await client.get_session(before.session_id)).last_seq
        # Nobody but this process can answer a review on a face of its own: such a resume stops to ask.
        run = await client.resume_run(args.run_id, headless=not client.on_daemon)
        sys.stderr.write(f"loom: resuming run {run.run_id} in session {run.session_id}\n")
        status = await watch_run(client, run.session_id, run.run_id, cursor, renderer)
        if status == "needs_review" and not client.on_daemon:
            sys.stderr.write("loom: nothing was run again; resume it with the daemon running to review the call\n")
        return EXIT_CODES.get(status, EXIT_FAILED)

    return with_client(main)


def _hint(event: Event) -> None:
    """What the resume did and what it waits for, on stderr."""
    if isinstance(event, RunResumed):
        done = [
            f"{label} {', '.join(ids)}"
            for label, ids in (
                ("reused", event.reused),
                ("running again", event.rerun),
                ("needs review", event.review),
                ("asking policy again", event.unstarted),
            )
            if ids
        ]
        summary = f": {'; '.join(done)}" if done else ""
        sys.stderr.write(f"loom: resumed run {event.run_id} after step {event.after_step}{summary}\n")
    elif isinstance(event, ApprovalRequested):
        what = "review" if event.kind == "review" else "approval"
        sys.stderr.write(
            f"loom: {what} needed for {event.tool}: loom approve {event.approval_id} / loom deny {event.approval_id}\n"
        )
