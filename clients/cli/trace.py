"""``loom trace RUN``: a run's timeline (model calls, tool calls with durations, approvals, errors).

The timeline is derived from the run's stored events: through the daemon's face when a daemon runs,
else from the database directly (:mod:`orchestrator.store.peek`, no MCP SDK to import), which gives the same
events. ``--jsonl`` prints one JSON object per timeline entry for scripts; ``loom export`` prints the raw
events instead. A policy denial's reason is shown whole: its last sentence says how to allow the call.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clients.cli.output import write_out

# The timeline lives there, shared with the TUI's /trace; these names stay importable from here.
from clients.timeline import TraceEntry as TraceEntry
from clients.timeline import build_timeline as build_timeline
from clients.timeline import render_timeline as render_timeline
from orchestrator.events import EVENT_ADAPTER, Event

if TYPE_CHECKING:
    from clients.loom import LoomClient

_PAGE = 1000


async def collect(client: LoomClient, run_id: str) -> tuple[dict[str, Any], list[Event]]:
    """The run's face record and its session's events, paged through ``read_events``."""
    run = await client.get_run(run_id)
    events: list[Event] = []
    cursor = 0
    while True:
        page = await client.read_events(run.session_id, after_seq=cursor, limit=_PAGE)
        events.extend(page.events)
        if len(page.events) < _PAGE:
            return run.model_dump(), events
        cursor = page.next_after_seq


def from_store(home: Path, run_id: str) -> tuple[dict[str, Any], list[Event]] | None:
    """The run (by id or unique prefix) and its session's events, read from the database; None if no such run.

    On the dbos engine the database is the shared Postgres one, read through the checkpoints server.

    Raises:
        orchestrator.store.peek.Unreadable: not a database the peek reads; ask the face instead.
        orchestrator.store.peek.ReadFailed: the dbos engine's database cannot be read.
    """
    from orchestrator.store import peek

    try:
        found = peek.find_run(home, run_id)
        if found is None:
            return None
        bodies = peek.session_events(home, found.session_id)
    except peek.OnServer:
        stored = peek.run_events(home, run_id, whole_session=True)
        if stored is None:
            return None
        found, bodies = stored
    run = {"run_id": found.id, "session_id": found.session_id, "status": found.shown_status}
    return run, [EVENT_ADAPTER.validate_json(body) for body in bodies]


def trace(run_id: str, jsonl: bool) -> int:
    """``loom trace RUN [--jsonl]``: 0, 2 for an unknown run (or a face's refusal), 1 if the store failed."""
    from clients.cli.exits import EXIT_FAILED, EXIT_USAGE
    from orchestrator.daemon.discovery import read_discovery
    from orchestrator.home import loom_home
    from orchestrator.store import peek

    home = loom_home()
    found: tuple[dict[str, Any], list[Event]] | int | None
    try:
        found = from_store(home, run_id) if read_discovery(home) is None else _through_face(run_id)
    except peek.Unreadable:  # not a file the peek reads: the face's store migrates it, or says why not
        found = _through_face(run_id)
    except peek.ReadFailed as exc:
        sys.stderr.write(f"loom: error: {exc}\n")
        return EXIT_FAILED
    if found is None:
        sys.stderr.write(f"loom: error: no run {run_id!r} in {peek.shown_store(home)}; `loom runs` lists them\n")
        return EXIT_USAGE
    if isinstance(found, int):  # the face said why
        return found
    run, events = found
    entries = build_timeline(events, run["run_id"])
    return write_out("".join(x.model_dump_json() + "\n" for x in entries) if jsonl else render_timeline(run, entries))


def _through_face(run_id: str) -> tuple[dict[str, Any], list[Event]] | int:
    """The run and its events from the face (the daemon's, or an in-process one), or the exit code after its error."""
    from clients.cli.driving import with_client

    found: list[tuple[dict[str, Any], list[Event]]] = []

    async def main(client: LoomClient) -> int:
        found.append(await collect(client, run_id))
        return 0

    code = with_client(main)
    return found[0] if found else code
