"""The events of long work as lines a person reads: shared by ``loom run`` / ``loom attach`` and the TUI.

Hooks, loop detection, the plan, goals, handoffs and memory carried over (:mod:`orchestrator.events_long`). Each
function gives the line and how loud it is (``info``, ``warning``, ``error``), or None when the event is not worth
a line (a hook that ran and had nothing to say). Everything drawn here came from a hook's output, a model or a
config file, so every text is cut to one safe line first: no escape sequence reaches a terminal.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from clients.timeline import first_line
from orchestrator.events import SessionCreated
from orchestrator.events_long import (
    CriterionVerdict,
    GoalBudget,
    GoalFinished,
    GoalSessionStarted,
    GoalSpent,
    GoalStarted,
    GoalVerdict,
    HandoffWritten,
    HookRan,
    LoopDetected,
    MemoryArchived,
    TodoItem,
)

__all__ = [
    "TODO_MARKS",
    "Level",
    "budget_text",
    "criterion_line",
    "goal_line",
    "handoff_from_line",
    "handoff_line",
    "hook_line",
    "loop_line",
    "memory_line",
    "notice_line",
    "spent_text",
    "todo_changes",
    "todo_summary",
]

Level = Literal["info", "warning", "error"]

TODO_MARKS = {"pending": "[ ]", "in_progress": "[>]", "completed": "[x]"}
"""A plan item's mark: readable without colour (the TUI colours them as well)."""

_QUIET_HOOKS = ("ok", "allow")
"""Outcomes of a hook that changed nothing: no line (the ``--json`` stream and ``loom trace`` have them all)."""


def hook_line(event: HookRan) -> tuple[str, Level] | None:
    """A hook's run that did something: a block, a denial, a rewrite, an error (None for a plain ``ok`` run)."""
    if event.outcome in _QUIET_HOOKS:
        return None
    on = f" on {first_line(event.tool, 80)}" if event.tool else ""
    who = f"hook {first_line(event.hook_event, 40)}{on}"
    why = f": {first_line(event.reason, 300)}" if event.reason else ""
    command = f" ({first_line(event.command, 80)})"
    if event.outcome == "error":
        how = "timed out or could not start" if event.exit_code is None else f"exited {event.exit_code}"
        line = f"{who} failed ({how}): {first_line(event.reason, 500)}" if event.reason else f"{who} failed ({how})"
        if event.command not in line:
            line += command
        if "onError" not in line:  # the runner's reason usually says how to opt out; if not (or cut), this does
            line += "; a failed hook blocks unless its onError is allow"
        return line, "error"
    said: dict[str, tuple[str, Level]] = {
        "deny": ("denied the call", "warning"),
        "block": ("blocked it", "warning"),
        "rewrite": ("rewrote the call's arguments", "warning"),
        "ask": ("asks for your approval", "warning"),
        "context": ("added context for the model", "info"),
        "continue": ("sent the run on", "info"),
    }
    what, level = said.get(event.outcome, (event.outcome, "info"))
    return f"{who} {what}{why}{command}", level


def loop_line(event: LoopDetected) -> tuple[str, Level]:
    """The model repeating itself: told (``notice``) or the run stopped (``stop``)."""
    calls = " → ".join(first_line(c, 80) for c in event.calls[:4]) or "the same call"
    if len(event.calls) > 4:
        calls += " → …"
    times = f"{event.repeats} time{'s' if event.repeats != 1 else ''} in a row"
    if event.action == "stop":
        return f"loop: {calls} came round {times} (step {event.step}); the run is stopped", "error"
    return f"loop: {calls} came round {times} (step {event.step}); the model was told to change course", "warning"


def handoff_line(event: HandoffWritten) -> tuple[str, Level]:
    """This session wrote its handoff and a fresh one goes on from it."""
    by = " (the goal's session passed its watermark)" if event.trigger == "goal" else ""
    told = len(event.instructions)
    carried = f", with {told} instruction{'s' if told != 1 else ''} of yours verbatim" if told else ""
    return (
        f"handed off to {first_line(event.to_session_id, 40)}{by}: a fresh session continues from the handoff"
        f"{carried}; this one is archived (loom handoff --show {first_line(event.to_session_id, 40)} reads it)",
        "info",
    )


def handoff_from_line(event: SessionCreated) -> str | None:
    """A session started from another's handoff says so (None for any other session)."""
    if not event.handoff_from:
        return None
    return f"this session continues {first_line(event.handoff_from, 40)} from its handoff (the old one is archived)"


def memory_line(event: MemoryArchived) -> tuple[str, Level]:
    """Notes of the session promoted to another namespace, so the next session starts warm."""
    count = len(event.keys)
    names = ", ".join(first_line(k, 40) for k in event.keys[:8]) + (", …" if count > 8 else "")
    source, target = first_line(event.from_namespace, 60), first_line(event.to_namespace, 60)
    if not count:
        return f"memory: no notes of {source} to carry over to {target}", "info"
    return f"memory: {count} note{'s' if count != 1 else ''} carried from {source} to {target}: {names}", "info"


def notice_line(event: object) -> tuple[str, Level] | None:
    """The quiet (or loud) line a conversation shows for a hook's run, a loop, a handoff or notes carried over.

    None for any other event, and for those not worth a line (a hook that had nothing to say).
    """
    if isinstance(event, HookRan):
        return hook_line(event)
    if isinstance(event, LoopDetected):
        return loop_line(event)
    if isinstance(event, HandoffWritten):
        # The fresh session holds a copy (``from_session_id`` set) that seeds its history; its
        # ``session_created`` already says where it came from, and this line would name the session itself.
        return None if event.from_session_id else handoff_line(event)
    if isinstance(event, MemoryArchived):
        return memory_line(event)
    if isinstance(event, SessionCreated):
        line = handoff_from_line(event)
        return (line, "info") if line is not None else None
    return None


# -- the plan ------------------------------------------------------------------------------------------------


def todo_summary(items: Sequence[TodoItem]) -> str:
    """``plan 2/5 done`` (and what is in progress)."""
    done = sum(i.status == "completed" for i in items)
    going = next((i for i in items if i.status == "in_progress"), None)
    now = f"; now: {first_line(going.text, 80)}" if going is not None else ""
    return f"plan {done}/{len(items)} done{now}"


def todo_changes(before: Sequence[TodoItem], after: Sequence[TodoItem], limit: int = 20) -> list[str]:
    """Lines for a plan's update: the whole checklist when its items changed, else only the items marked anew.

    A model marks its plan item by item; printing the whole list each time would bury the run's output.
    """
    if not after:
        return ["plan cleared"] if before else []
    head = todo_summary(after)
    if [i.text for i in before] != [i.text for i in after]:
        lines = [head] + [f"  {TODO_MARKS[i.status]} {first_line(i.text, 120)}" for i in after[:limit]]
        return lines + ([f"  … {len(after) - limit} more"] if len(after) > limit else [])
    marked = [i for i, old in zip(after, before, strict=True) if i.status != old.status]
    return [f"{head.split(';')[0]}: {TODO_MARKS[i.status]} {first_line(i.text, 120)}" for i in marked[:limit]]


# -- goals ---------------------------------------------------------------------------------------------------


def budget_text(budget: GoalBudget) -> str:
    """``3 sessions, 200 steps, 30m`` (``no limit`` when none is set)."""
    parts = []
    if budget.sessions is not None:
        parts.append(f"{budget.sessions} session{'s' if budget.sessions != 1 else ''}")
    if budget.steps is not None:
        parts.append(f"{budget.steps} steps")
    if budget.tokens is not None:
        parts.append(f"{budget.tokens:,} tokens")
    if budget.time_s is not None:
        parts.append(_duration(budget.time_s))
    return ", ".join(parts) or "no limit"


def spent_text(spent: GoalSpent) -> str:
    """``2 sessions, 31 steps, 12,400 tokens, 3m 20s``."""
    sessions = f"{spent.sessions} session{'s' if spent.sessions != 1 else ''}"
    return f"{sessions}, {spent.steps} steps, {spent.tokens:,} tokens, {_duration(spent.time_s)}"


def criterion_line(verdict: CriterionVerdict) -> str:
    """``✓ pass  the tests pass: pytest exit 0`` (the word says it without colour)."""
    mark = "✓ pass" if verdict.passed else "✗ FAIL"
    why = f": {first_line(verdict.reason, 200)}" if verdict.reason else ""
    return f"{mark}  {first_line(verdict.criterion, 120)}{why}"


def goal_line(event: GoalStarted | GoalSessionStarted | GoalVerdict | GoalFinished) -> tuple[list[str], Level]:
    """A goal's step as lines: its start, a work session's start, a verdict per criterion, its end."""
    gid = first_line(event.goal_id, 40)
    if isinstance(event, GoalStarted):
        criteria = [f"  [ ] {first_line(c, 120)}" for c in event.criteria]
        return [f"goal {gid}: {first_line(event.goal, 200)} (budget: {budget_text(event.budget)})", *criteria], "info"
    if isinstance(event, GoalSessionStarted):
        via = f", continuing {first_line(event.handoff_from, 40)} from its handoff" if event.handoff_from else ""
        return [f"goal {gid}: session {event.attempt} ({first_line(event.child_session_id, 40)}) started{via}"], "info"
    if isinstance(event, GoalVerdict):
        passed = sum(c.passed for c in event.criteria)
        word = "passed" if event.passed else "not yet"
        head = f"goal {gid}: session {event.attempt} graded: {word} ({passed}/{len(event.criteria)} criteria)"
        return [head] + [f"  {criterion_line(c)}" for c in event.criteria], "info" if event.passed else "warning"
    level: Level = "info" if event.status == "completed" else "warning" if event.status == "cancelled" else "error"
    why = f": {first_line(event.reason, 300)}" if event.reason else ""
    left = [f"  left: {first_line(item, 200)}" for item in event.left[:20]]
    return [f"goal {gid} {event.status}{why} (spent {spent_text(event.spent)})", *left], level


def _duration(seconds: float) -> str:
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes}m" if minutes else f"{hours}h"
    if minutes:
        return f"{minutes}m {secs}s" if secs else f"{minutes}m"
    return f"{secs}s"
