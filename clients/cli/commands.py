"""The CLI commands that run a session or read the store: ``run``, ``export`` and ``runs``.

Only the standard library is imported at module level: ``loom runs`` lists from the database in a few
tens of milliseconds (:mod:`orchestrator.store.peek`) and must not pay for the runtime that ``loom run`` loads.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from clients.cli.exits import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from clients.cli.output import write_out

if TYPE_CHECKING:
    from clients.loom import LoomClient
    from orchestrator.events import Event
    from orchestrator.store.peek import RunRow


def _fail(message: str, code: int = EXIT_USAGE) -> int:
    sys.stderr.write(f"loom: error: {message}\n")
    return code


def quiet_logging() -> None:
    """Send library logs to stderr at ``$LOOM_LOG_LEVEL`` (default WARNING), before anything configures them."""
    import logging

    # MCPServer.__init__ calls logging.basicConfig; configuring first keeps library INFO logs off the terminal.
    level = os.environ.get("LOOM_LOG_LEVEL", "WARNING").upper()
    logging.basicConfig(level=level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")


def run(args: argparse.Namespace) -> int:
    """``loom run GOAL``: one headless session in the current directory, through the daemon if one runs.

    Without a daemon the session runs in this process, behind the same face a daemon serves, so both print
    the same thing. Shared: this process writes only the session it creates, so other ``loom run`` may go
    on beside it.
    """
    from clients.cli.driving import EXIT_CODES, fail, watch_run, with_client
    from clients.cli.render import JsonRenderer, TerminalRenderer
    from clients.cli.trust import ask_to_trust
    from orchestrator.config import ConfigError, load_config, loom_home
    from orchestrator.models import choose_model_spec
    from orchestrator.trust import untrusted_notes

    quiet_logging()
    cwd = Path(args.cwd).expanduser() if args.cwd else Path.cwd()
    if not cwd.is_dir():
        return fail(f"--cwd {cwd}: not a directory")
    cwd = cwd.resolve()
    home = loom_home()
    extra = Path(args.config).expanduser() if args.config else None
    try:
        # A bad config or policy file is a usage error, before anything runs; the face reads them itself.
        if ask_to_trust(home, cwd, untrusted_notes(home, cwd, extra)):  # asks at a terminal only
            untrusted_notes(home, cwd, extra)  # the files as trusted must still be valid
        # The rule the face follows too, applied here so that --model, LOOM_MODEL and this project's config
        # choose the model on a daemon as well (whose environment and working directory are its own).
        spec = choose_model_spec(args.model, load_config(home, cwd, extra).model)
    except ConfigError as exc:
        return fail(str(exc))
    if args.mode == "bypass":
        sys.stderr.write("loom: mode bypass: every tool call runs without asking (deny rules still apply)\n")
    renderer: Callable[[Event], None] = JsonRenderer() if args.json else TerminalRenderer()

    async def main(client: LoomClient) -> int:
        if client.on_daemon and extra is not None:
            sys.stderr.write(
                f"loom: --config {extra} is not used: the daemon runs with the configuration it started with\n"
            )
        session = await client.create_session(str(cwd), model=spec, mode=args.mode, headless=True)
        started = await client.send_message(session.session_id, args.goal, max_steps=args.max_steps)
        status = await watch_run(client, session.session_id, started.run_id, 0, renderer)
        return EXIT_CODES.get(status, EXIT_FAILED)

    return with_client(main, cwd=cwd, config_path=extra, shared=True)


def export(run_id: str) -> int:
    """``loom export RUN``: the run's stored events as JSONL (RUN may be a unique prefix of the id)."""
    from orchestrator.home import loom_home
    from orchestrator.store import peek

    home = loom_home()
    try:
        found = peek.run_events(home, run_id)
    except peek.ReadFailed as exc:
        return _fail(str(exc), EXIT_FAILED)
    if found is None:
        return _fail(f"no run {run_id!r} in {peek.shown_store(home)}; `loom runs` lists them")
    from orchestrator.events import EVENT_ADAPTER

    # Parsed and dumped again, so that each line carries its seq as the face's events do.
    return write_out("".join(EVENT_ADAPTER.validate_json(body).model_dump_json() + "\n" for body in found[1]))


def list_runs(limit: int) -> int:
    """``loom runs``: recent runs, newest first, under a header line (on the dbos engine, from its database)."""
    from orchestrator.home import loom_home
    from orchestrator.store import peek

    home = loom_home()
    try:
        database = peek.engine_database(home)
        runs = peek.list_runs(home, limit)
    except peek.ReadFailed as exc:
        return _fail(str(exc), EXIT_FAILED)
    if not runs:
        sys.stderr.write(f"loom: no runs yet in {peek.shown_store(home)}\n")
        return EXIT_OK
    # The dbos engine's runs go from worker to worker: the listing says who holds each.
    return write_out(runs_table(runs, owners=database is not None))


_REASON_WIDTH = 80


def runs_table(runs: Sequence[RunRow], *, owners: bool = False) -> str:
    """The ``loom runs`` listing: a header line, then one aligned line per run.

    A reason longer than the column is cut with a visible ``…``; ``loom trace RUN`` shows it whole. With ``owners``
    (the dbos engine) an OWNER column after STATUS says which worker holds each run (``worker ID``, ``queued``, ``-``).
    """
    import time

    rows = [("RUN", "STARTED", "STATUS", *(("OWNER",) if owners else ()), "MODEL", "REASON")]
    for r in runs:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.started))
        status = r.shown_status
        reason = " ".join(r.shown_reason.split()) if status != "completed" else ""
        if len(reason) > _REASON_WIDTH:
            reason = reason[: _REASON_WIDTH - 1] + "…"
        rows.append((r.id, when, status, *((r.shown_owner,) if owners else ()), r.model, reason))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)] + [0]
    lines = ("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows)
    return "".join(line + "\n" for line in lines)
