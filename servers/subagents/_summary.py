"""What a parent learns about a child's run: its outcome and a short summary, computed from the child's events.

The parent's context grows by this, never by the child's transcript: the final answer (cut to
:data:`MAX_ANSWER_CHARS`), the files the child changed, the commands it ran and the questions its answer leaves
open, each list bounded. While the run goes on, the same events give its progress: steps so far, the tool it is
calling now, how long it has run.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, Field

from orchestrator.events import (
    ApprovalDecided,
    ApprovalRequested,
    AssistantMessage,
    Event,
    RunFinished,
    RunQueued,
    RunStarted,
    ToolCallFinished,
    ToolCallStarted,
)

__all__ = [
    "FINISHED",
    "MAX_ANSWER_CHARS",
    "ChildState",
    "ChildSummary",
    "child_state",
    "open_questions",
    "outcome",
    "summarize",
]

MAX_ANSWER_CHARS = 12_000
"""The most of a child's final answer a result carries; the child's own session keeps all of it."""
MAX_ITEMS = 20
"""Entries per summary list; the rest are counted in the list's last entry."""
MAX_ITEM_CHARS = 300
"""Characters per summary entry (a path, a command, a question)."""

FINISHED = frozenset({"completed", "failed", "cancelled", "timed_out", "interrupted", "needs_review"})
"""Statuses a child's run no longer leaves by itself (``needs_review`` and ``interrupted`` wait for a resume)."""

_CHANGES = {"fs__write", "fs__edit", "fs__delete"}
"""The tools whose successful call changes the file named by its ``path`` argument."""
_COMMANDS = "shell__run"
_HEADING = re.compile(r"^\s*(?:#{1,6}\s*|\*\*|__)?\s*(open questions|questions|unresolved|open issues)\b", re.I)
_ANY_HEADING = re.compile(r"^\s*(?:#{1,6}\s+\S|\*\*[^*]+\*\*\s*:?\s*$|[A-Z][\w ]{0,40}:\s*$)")
_BULLET = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+")


class ChildSummary(BaseModel):
    """What a child's run did, in a few lines."""

    files_changed: list[str] = Field(default_factory=list[str])
    """Paths the child wrote, edited or deleted (calls that succeeded), as it named them, in order."""
    commands_run: list[str] = Field(default_factory=list[str])
    """Shell commands it ran, in order (a failed one ends with ``(failed)``)."""
    open_questions: list[str] = Field(default_factory=list[str])
    """Questions its final answer leaves open: lines ending in '?' or listed under an "Open questions" heading."""


class ChildState(BaseModel):
    """Where one child is: its result once its run has ended, else its progress."""

    child_id: str
    """The child's session id: pass it to result, send, cancel and wait (and `loom attach`)."""
    run_id: str
    agent: str = ""
    status: str
    """completed, failed, cancelled, timed_out (its timeout passed), interrupted (Loom stopped; it resumes),
    needs_review; or, still going, queued, running, awaiting_approval."""
    finished: bool
    reason: str = ""
    steps: int = 0
    """Model calls so far."""
    elapsed_s: float = 0.0
    current_tool: str = ""
    """The tool the child is calling right now, while it runs."""
    final_text: str = ""
    """The child's final answer (cut to a bound; its session keeps all of it)."""
    summary: ChildSummary | None = None
    """Files changed, commands run and open questions, once the run has ended."""
    pending_approvals: list[str] = Field(default_factory=list[str])
    """Approvals the child waits for: any attached client answers them (decide_approval, `loom approve`)."""


def outcome(status: str, reason: str) -> str:
    """The status a parent sees: a run the face failed for passing its deadline is ``timed_out``."""
    if status == "failed" and reason.startswith("timed out"):
        return "timed_out"
    return status


def _bounded(items: Sequence[str]) -> list[str]:
    shown = [item if len(item) <= MAX_ITEM_CHARS else item[: MAX_ITEM_CHARS - 1] + "…" for item in items]
    if len(shown) > MAX_ITEMS:
        return [*shown[: MAX_ITEMS - 1], f"... and {len(shown) - MAX_ITEMS + 1} more"]
    return shown


def open_questions(text: str) -> list[str]:
    """The questions an answer leaves open: its lines ending in '?', and the items under an "Open questions" heading.

    A heading's section ends at the next heading or at a blank line after some items.
    """
    found: list[str] = []
    under = False
    items_under = 0
    for raw in text.splitlines():
        line = raw.strip()
        if _HEADING.match(line) and len(line) <= 80 and not line.endswith("?"):
            under, items_under = True, 0
            continue
        if under and not line and items_under:
            under = False
        elif under and _ANY_HEADING.match(line) and not _BULLET.match(line):
            under = False
        item = _BULLET.sub("", line).strip().strip("*_").strip()
        if not item or item.lower().rstrip(".") in ("none", "n/a", "no"):
            continue
        if under or item.endswith("?"):
            items_under += under
            if item not in found:
                found.append(item)
    return _bounded(found)


def summarize(events: Iterable[Event], run_id: str, final_text: str) -> ChildSummary:
    """The summary of one run of a child, from its session's events (others are skipped)."""
    started: dict[str, ToolCallStarted] = {}
    files: list[str] = []
    commands: list[str] = []
    for event in events:
        if isinstance(event, ToolCallStarted) and event.run_id == run_id:
            started[event.call_id] = event
        elif isinstance(event, ToolCallFinished) and event.run_id == run_id:
            call = started.get(event.call_id)
            if call is None:
                continue
            if call.tool in _CHANGES and not event.is_error:
                path = call.arguments.get("path")
                if isinstance(path, str) and path not in files:
                    files.append(path)
            elif call.tool == _COMMANDS:
                command = call.arguments.get("command")
                if isinstance(command, str):
                    commands.append(f"{command} (failed)" if event.is_error else command)
    return ChildSummary(
        files_changed=_bounded(files), commands_run=_bounded(commands), open_questions=open_questions(final_text)
    )


def child_state(
    child_id: str,
    run_id: str,
    events: Sequence[Event],
    *,
    status: str,
    reason: str = "",
    final_text: str = "",
    agent: str = "",
    pending_approvals: Sequence[str] = (),
    now: float | None = None,
    answer_chars: int = MAX_ANSWER_CHARS,
) -> ChildState:
    """A child's state from the face's view of its run (``status``...) and its session's events.

    Args:
        child_id: the child's session id.
        run_id: the run to describe; events of other runs are skipped.
        events: the child's events, at least those of this run, oldest first.
        status: the run's status as the face gives it (``failed`` with a "timed out" reason becomes timed_out).
        reason: why it ended, when it has.
        final_text: its answer, when it completed.
        agent: the agent definition the child runs as.
        pending_approvals: approval ids it waits for.
        now: the clock for the elapsed time of a run still going (default: now).
        answer_chars: how much of the answer to carry (a wait for many children shares one budget).
    """
    status = outcome(status, reason)
    began: float | None = None
    ended: float | None = None
    steps = 0
    open_calls: dict[str, str] = {}
    finished_steps: int | None = None
    for event in events:
        if getattr(event, "run_id", None) != run_id:
            continue
        if isinstance(event, RunQueued | RunStarted) and began is None:
            began = event.ts
        elif isinstance(event, AssistantMessage):
            steps += 1
        elif isinstance(event, ToolCallStarted):
            open_calls[event.call_id] = event.tool
        elif isinstance(event, ToolCallFinished):
            open_calls.pop(event.call_id, None)
        elif isinstance(event, ApprovalRequested):  # the call it waits to make is the one it is in
            open_calls[event.approval_id] = event.tool
        elif isinstance(event, ApprovalDecided):
            open_calls.pop(event.approval_id, None)
        elif isinstance(event, RunFinished):
            ended, finished_steps = event.ts, event.steps
            final_text = final_text or event.final_text
            reason = reason or event.reason
    done = status in FINISHED
    end = ended if ended is not None else (now if now is not None else time.time())
    answer = final_text
    if len(final_text) > answer_chars:
        more = "" if answer_chars >= MAX_ANSWER_CHARS else f"; result({child_id}) gives up to {MAX_ANSWER_CHARS:,}"
        answer = f"{final_text[:answer_chars]}\n[cut at {answer_chars:,} of {len(final_text):,} characters{more}]"
    return ChildState(
        child_id=child_id,
        run_id=run_id,
        agent=agent,
        status=status,
        finished=done,
        reason=reason,
        steps=finished_steps if finished_steps is not None else steps,
        elapsed_s=round(max(0.0, end - began), 3) if began is not None else 0.0,
        current_tool="" if done else next(reversed(open_calls.values()), ""),
        final_text=answer if done else "",
        summary=summarize(events, run_id, final_text) if done else None,
        pending_approvals=list(pending_approvals),
    )
