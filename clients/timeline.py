"""A run's timeline from its session's events: model calls, tool calls with durations, approvals, errors.

Shared by ``loom trace`` (:mod:`clients.cli.trace`) and the TUI's ``/trace``; only pydantic and the event
models are imported, so ``loom trace`` reading the store directly still imports no MCP SDK.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel

from clients.server_rows import server_event_line
from orchestrator.events import (
    ApprovalDecided,
    ApprovalRequested,
    AssistantMessage,
    ChildActivity,
    ChildFinished,
    ChildStarted,
    Event,
    ModelRetry,
    Notice,
    RunFinished,
    RunResumed,
    RunStarted,
    ServerFailed,
    ServerLog,
    ServerStateChanged,
    ToolCallFinished,
    ToolCallStarted,
    UserMessage,
)

__all__ = ["EntryKind", "TraceEntry", "build_timeline", "child_label", "first_line", "render_timeline"]

EntryKind = Literal[
    "run", "user", "model_call", "model_retry", "tool_call", "approval", "notice", "error", "child", "child_tool"
]
"""``child``: a child session's run (from its start, with its final status); ``child_tool``: a tool it called."""


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
    mine += [e for e in events if isinstance(e, ServerFailed | ServerStateChanged | ServerLog) and t0 <= e.ts <= t_end]
    started: dict[str, ToolCallStarted] = {}
    asked: dict[str, ApprovalRequested] = {}
    children: dict[str, ChildStarted] = {}
    """child_run_id -> its start, until it finishes."""
    agents: dict[str, str] = {}
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
        elif isinstance(e, ChildStarted):
            children[e.child_run_id] = e
            agents[e.child_session_id] = e.agent
        elif isinstance(e, ChildActivity):
            who = child_label(agents.get(e.child_session_id, ""), e.child_session_id)
            add(e.ts, kind="child_tool", step=e.step, name=e.tool, status="called", detail=who)
        elif isinstance(e, ChildFinished):
            spawn = children.pop(e.child_run_id, None)
            why = f" ({_short(e.reason)})" if e.reason and e.status != "completed" else ""
            add(
                e.ts - e.elapsed_s,
                kind="child",
                name=agents.get(e.child_session_id, "") or "child",
                duration_ms=round(e.elapsed_s * 1000, 3),
                status=e.status,
                detail=f"{e.child_session_id}: {first_line(spawn.goal) if spawn else ''}{why}".rstrip(": "),
            )
        elif isinstance(e, ApprovalDecided):
            request = asked.pop(e.approval_id, None)
            start = request.ts if request is not None else e.ts
            why = f": {e.reason}" if e.reason else ""
            if e.child_session_id:
                why += f" (child {e.child_session_id})"
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
        elif isinstance(e, ServerStateChanged | ServerLog):
            line = server_event_line(e)  # a failure is the server_failed entry's; a first start is not shown
            if line is not None:
                status = f"server_{e.state}" if isinstance(e, ServerStateChanged) else f"log {_short(e.level, 20)}"
                kind: EntryKind = "notice" if line[1] == "info" else "error"
                add(e.ts, kind=kind, name=e.server, status=status, detail=_short(line[0], 240))
        elif isinstance(e, RunFinished):
            add(e.ts, kind="run", status=e.status, detail=_short(e.reason) if e.status != "completed" else "")
    for call_id, begun in started.items():  # started, never finished: the run was cut off during the call
        add(begun.ts, kind="tool_call", step=begun.step, name=begun.tool, status="unfinished", detail=call_id)
    for request in asked.values():
        add(request.ts, kind="approval", name=request.tool, status="undecided", detail=_short(request.reason))
    for child in children.values():  # started, not finished when the events were read
        detail = f"{child.child_session_id}: {first_line(child.goal)}"
        add(child.ts, kind="child", name=child.agent or "child", status="unfinished", detail=detail)
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
            "child_tool": "ch.tool",
        }.get(x.kind, x.kind)
        lines.append(
            f"{x.at_s:>9.3f}s {duration}  {label:<8} {step:<4} {x.name:<24} {x.status:<18} {x.detail}".rstrip()
        )
    return "\n".join(lines) + "\n"


def first_line(text: str, limit: int = 100) -> str:
    """The first non-empty line of ``text`` (a child's goal or answer), safe to print: no control characters."""
    line = next((part for part in text.strip().splitlines() if part.strip()), "")
    return _short(_printable(line[: limit * 2]), limit)


def child_label(agent: str, child_session_id: str) -> str:
    """A child as a line names it: ``child 'reviewer' s_1a2b3c4d5e6f`` (agent names come from anyone's files)."""
    agent = _short(_printable(agent), 40)
    return f"child '{agent}' {child_session_id}" if agent else f"child {child_session_id}"


def _printable(text: str) -> str:
    """``text`` without control or format characters (an escape sequence never reaches a terminal)."""
    return "".join(c if unicodedata.category(c)[0] != "C" else " " for c in text)


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
