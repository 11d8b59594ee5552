"""``loom trace RUN``: a run's timeline (model calls, tool calls with durations, approvals, errors).

The timeline is derived from the run's stored events: through the daemon's face when a daemon runs,
else from the database directly (:mod:`orchestrator.store.peek`, no MCP SDK to import), which gives the same
events. ``--jsonl`` prints one JSON object per timeline entry for scripts; ``loom export`` prints the raw
events instead. A policy denial's reason is shown whole: its last sentence says how to allow the call.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from clients.cli.output import write_out
from orchestrator.events import (
    EVENT_ADAPTER,
    ApprovalDecided,
    ApprovalRequested,
    AssistantMessage,
    Event,
    ModelRetry,
    Notice,
    RunFinished,
    RunResumed,
    RunStarted,
    ServerFailed,
    ToolCallFinished,
    ToolCallStarted,
    UserMessage,
)

if TYPE_CHECKING:
    from clients.loom import LoomClient

EntryKind = Literal["run", "user", "model_call", "model_retry", "tool_call", "approval", "notice", "error"]

_PAGE = 1000


class TraceEntry(BaseModel):
    """One line of a run's timeline."""

    at_s: float
    """Seconds from the start of the run to the start of this entry."""
    kind: EntryKind
    step: int | None = None
    name: str = ""
    """The tool for tool calls and approvals, the model for model calls."""
    duration_ms: float | None = None
    status: str = ""
    """``ok``, a failure kind, an approval decision, or the run's final status."""
    detail: str = ""


def build_timeline(events: Sequence[Event], run_id: str) -> list[TraceEntry]:
    """The timeline of ``run_id`` from a session's events, in the order things started."""
    mine = [e for e in events if getattr(e, "run_id", None) == run_id]
    if not mine:
        return []
    t0 = min(_start_of(e) for e in mine)
    t_end = max(e.ts for e in mine)
    # Server failures carry no run id: those recorded while the run went on belong to its timeline.
    mine += [e for e in events if isinstance(e, ServerFailed) and t0 <= e.ts <= t_end]
    started: dict[str, ToolCallStarted] = {}
    asked: dict[str, ApprovalRequested] = {}
    entries: list[TraceEntry] = []

    def add(start: float, **fields: Any) -> None:
        entries.append(TraceEntry(at_s=round(start - t0, 3), **fields))

    for e in mine:
        if isinstance(e, RunStarted):
            add(e.ts, kind="run", name=e.model, status="started", detail=f"at most {e.max_steps} steps")
        elif isinstance(e, UserMessage):
            add(e.ts, kind="user", detail=_short(e.text))
        elif isinstance(e, AssistantMessage):
            uses = e.message.tool_uses
            what = f"{len(uses)} tool call{'s' if len(uses) != 1 else ''}" if uses else _short(e.message.text)
            tokens = f"{e.usage.input_tokens} in / {e.usage.output_tokens} out tokens"
            add(
                _start_of(e),
                kind="model_call",
                step=e.step,
                duration_ms=e.duration_ms,
                status=e.stop_reason,
                detail=f"{tokens}; {what}",
            )
        elif isinstance(e, RunResumed):
            what = f"{len(e.reused)} reused, {len(e.rerun)} run again, {len(e.review)} to review"
            add(e.ts, kind="run", status="resumed", detail=f"after step {e.after_step}: {what}")
        elif isinstance(e, ModelRetry):
            add(e.ts, kind="model_retry", step=e.step, status=f"attempt {e.attempt}", detail=_short(e.error))
        elif isinstance(e, ToolCallStarted):
            started[e.call_id] = e
        elif isinstance(e, ToolCallFinished):
            begun = started.pop(e.call_id, None)
            add(
                begun.ts if begun is not None else e.ts,
                kind="tool_call",
                step=e.step,
                name=e.tool,
                duration_ms=e.duration_ms,
                status=e.failure or ("error" if e.is_error else "ok"),
                detail=_error_detail(e) if e.is_error else _arguments(begun),
            )
        elif isinstance(e, ApprovalRequested):
            asked[e.approval_id] = e
        elif isinstance(e, ApprovalDecided):
            request = asked.pop(e.approval_id, None)
            start = request.ts if request is not None else e.ts
            why = f": {e.reason}" if e.reason else ""
            add(
                start,
                kind="approval",
                name=request.tool if request is not None else "",
                duration_ms=round((e.ts - start) * 1000, 3),
                status=e.decision,
                detail=f"by {e.decided_by}{why}",
            )
        elif isinstance(e, Notice):
            add(e.ts, kind="error" if e.level == "error" else "notice", detail=_short(e.text))
        elif isinstance(e, ServerFailed):
            add(e.ts, kind="error", name=e.server, status="server_failed", detail=_short(e.error))
        elif isinstance(e, RunFinished):
            add(e.ts, kind="run", status=e.status, detail=_short(e.reason) if e.status != "completed" else "")
    for call_id, begun in started.items():  # started, never finished: the run was cut off during the call
        add(begun.ts, kind="tool_call", step=begun.step, name=begun.tool, status="unfinished", detail=call_id)
    for request in asked.values():
        add(request.ts, kind="approval", name=request.tool, status="undecided", detail=_short(request.reason))
    entries.sort(key=lambda x: x.at_s)
    return entries


def render_timeline(run: dict[str, Any], entries: Sequence[TraceEntry]) -> str:
    """The timeline as aligned text lines, headed by the run's id, session and status."""
    lines = [f"run {run['run_id']}  session {run['session_id']}  status {run['status']}"]
    for x in entries:
        duration = f"{x.duration_ms:>9.1f} ms" if x.duration_ms is not None else " " * 12
        step = f"#{x.step}" if x.step is not None else ""
        label = {
            "model_call": "model",
            "tool_call": "tool",
            "model_retry": "retry",
        }.get(x.kind, x.kind)
        lines.append(
            f"{x.at_s:>9.3f}s {duration}  {label:<8} {step:<4} {x.name:<24} {x.status:<18} {x.detail}".rstrip()
        )
    return "\n".join(lines) + "\n"


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

    Raises:
        orchestrator.store.peek.Unreadable: not a database the peek reads; ask the face instead.
    """
    from orchestrator.store import peek

    found = peek.find_run(home, run_id)
    if found is None:
        return None
    run = {"run_id": found.id, "session_id": found.session_id, "status": found.shown_status}
    return run, [EVENT_ADAPTER.validate_json(body) for body in peek.session_events(home, found.session_id)]


def trace(run_id: str, jsonl: bool) -> int:
    """``loom trace RUN [--jsonl]``: 0, 2 for an unknown run (or a face's refusal), 1 if the store failed."""
    from clients.cli.exits import EXIT_USAGE
    from orchestrator.daemon.discovery import read_discovery
    from orchestrator.home import loom_home
    from orchestrator.store import peek

    home = loom_home()
    found: tuple[dict[str, Any], list[Event]] | int | None
    try:
        found = from_store(home, run_id) if read_discovery(home) is None else _through_face(run_id)
    except peek.Unreadable:  # not a file the peek reads: the face's store migrates it, or says why not
        found = _through_face(run_id)
    if found is None:
        sys.stderr.write(f"loom: error: no run {run_id!r} in {home}; `loom runs` lists them\n")
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


def _error_detail(event: ToolCallFinished) -> str:
    """A failed call's result: a policy denial whole (it ends with how to allow the call), else cut with ``…``."""
    return " ".join(event.content.split()) if event.failure == "denied" else _short(event.content, 240)


def _start_of(event: Event) -> float:
    if isinstance(event, AssistantMessage):
        return event.ts - event.duration_ms / 1000
    return event.ts


def _arguments(started: ToolCallStarted | None) -> str:
    return _short(json.dumps(started.arguments, ensure_ascii=False)) if started is not None else ""


def _short(text: str, limit: int = 100) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
