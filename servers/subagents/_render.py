"""What the parent's model reads: the subagents tools' results as short text (clients get the structured JSON).

Loom gives a model a tool result's text and cuts it past 16,000 characters (head and tail), so the JSON of a wait
for twenty children, mostly field names and empty lists, would lose the middle children. The text says the same
in a few lines per child, within :data:`TEXT_LIMIT`: with many children, their summaries are listed shorter (the
structured content and ``result`` keep them whole).
"""

from __future__ import annotations

from collections.abc import Sequence

from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel

from servers.subagents._models import SpawnedMany, WaitResult
from servers.subagents._summary import ChildState

__all__ = ["TEXT_LIMIT", "as_result", "render_many", "render_state", "render_wait"]

TEXT_LIMIT = 15_000
"""What a result's text aims to stay under (below the 16,000 at which Loom cuts a tool result)."""
_ITEMS = (8, 3, 1)
"""Summary entries shown per list: as many as fit, then fewer when the whole would be too long."""


def as_result(text: str, model: BaseModel) -> CallToolResult:
    """A tool result whose text is ``text`` and whose structured content is ``model``."""
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=model.model_dump(mode="json")
    )


def _listed(items: Sequence[str], most: int) -> str:
    shown = "; ".join(items[:most])
    return f"{shown} (+{len(items) - most} more)" if len(items) > most else shown


def render_state(state: ChildState, *, items: int = _ITEMS[0]) -> str:
    """One child: its outcome and summary once finished, else its progress."""
    who = state.child_id + (f" (agent {state.agent})" if state.agent else "")
    if not state.finished:
        line = f"{who}: {state.status}, {state.steps} steps so far, {state.elapsed_s:.1f} s"
        if state.current_tool:
            line += f", in {state.current_tool}"
        if state.pending_approvals:
            line += f"; waiting for approval {', '.join(state.pending_approvals)}"
        return line
    steps = "1 step" if state.steps == 1 else f"{state.steps} steps"
    lines = [f"{who}: {state.status}, {steps}, {state.elapsed_s:.1f} s"]
    if state.reason and state.status != "completed":  # a completed run's reason is only how the model stopped
        lines.append(f"  reason: {state.reason}")
    summary = state.summary
    if summary is not None:
        for label, values in (
            ("files changed", summary.files_changed),
            ("commands run", summary.commands_run),
            ("open questions", summary.open_questions),
        ):
            if values:
                lines.append(f"  {label}: {_listed(values, items)}")
    if state.final_text:
        lines.append("  answer:")
        lines.extend(f"    {line}" for line in state.final_text.splitlines())
    return "\n".join(lines)


def render_wait(result: WaitResult) -> str:
    """A wait: what finished, what is still going, and whether the wait's own bound ended it."""
    for items in _ITEMS:
        head = f"{len(result.finished)} finished, {len(result.running)} still going (waited {result.waited_s:.1f} s)"
        if result.timed_out:
            head += "; the wait's timeout passed: the others go on, wait again or cancel them"
        parts = [head]
        if result.note:
            parts.append(result.note)
        parts.extend(render_state(s, items=items) for s in result.finished)
        parts.extend(render_state(s, items=items) for s in result.running)
        text = "\n\n".join(parts)
        if len(text) <= TEXT_LIMIT:
            break
    return text


def render_many(result: SpawnedMany) -> str:
    """What spawn_many started: one line per child, in the order asked."""
    lines = [f"{result.started} started, {result.refused} refused"]
    for entry in result.children:
        if entry.started:
            lines.append(f"{entry.index}: {entry.child_id} {entry.status} (run {entry.run_id})")
        else:
            lines.append(f"{entry.index}: refused: {entry.error}")
    return "\n".join(lines)
