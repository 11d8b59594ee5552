"""The model's plan (the ``loom__todo`` tool) as its context holds it: found in the events, written out verbatim.

Between compactions the plan is in the context already: every ``loom__todo`` call and its result (the whole plan
as it then stood) are part of the history. A compaction drops those calls, so the code that builds the summary
turn writes the plan out after the summary, item for item as the model wrote it; the summariser never rewrites it.

A compaction also records the plan again (a ``todo_updated`` event marked ``carried``, in the same batch as its
``context_compacted``), so the events a context is rebuilt from (the latest compaction and what it kept) always
hold the session's latest plan: :func:`latest_plan` of them is the current plan, and :func:`carried_plan` is the
one the summary turn shows, in a reopened session exactly as in the one that compacted.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from orchestrator.events import ContextCompacted, Event
from orchestrator.events_long import TodoItem, TodoUpdated

__all__ = ["PLAN_HEADING", "PlanItems", "carried_plan", "carry_plan", "latest_plan", "plan_section", "render_plan"]

PLAN_HEADING = "[Your plan, as you last wrote it with loom__todo; Loom keeps it verbatim through compactions:]"
"""The line that opens the plan in the summary turn."""

PlanItems = Sequence[TodoItem]
"""A plan: its items in order."""

_BOXES = {"completed": "[x]", "in_progress": "[in progress]", "pending": "[ ]"}


def render_plan(items: Sequence[TodoItem]) -> str:
    """The plan as numbered checklist lines (``2. [in progress] Write the tests``), numbered as ``marks`` count."""
    return "\n".join(f"{n}. {_BOXES[item.status]} {item.text}" for n, item in enumerate(items, 1))


def latest_plan(events: Iterable[Event]) -> list[TodoItem]:
    """The plan as the newest ``todo_updated`` among ``events`` left it (empty when there is none)."""
    found: list[TodoItem] = []
    for event in events:
        if isinstance(event, TodoUpdated):
            found = event.items
    return list(found)


def carried_plan(events: Sequence[Event], compaction_index: int) -> list[TodoItem]:
    """The plan the compaction at ``events[compaction_index]`` carried, if it carried one.

    It is the first ``todo_updated`` after the compaction, recorded in the same batch; a plan written later is
    in the history as its call, so a first one that is not ``carried`` means the compaction carried none.
    """
    if not isinstance(events[compaction_index], ContextCompacted):
        raise ValueError("carried_plan needs the index of a context_compacted event")
    for event in events[compaction_index + 1 :]:
        if isinstance(event, TodoUpdated):
            return list(event.items) if event.carried else []
        if isinstance(event, ContextCompacted):
            break
    return []


def carry_plan(events: Sequence[Event], compaction: ContextCompacted) -> list[TodoUpdated]:
    """What to record in the batch of ``compaction``: the current plan again (``carried``), or nothing if empty.

    Args:
        events: the events the compaction was planned from (the context's: they hold the latest plan).
        compaction: the compaction about to be recorded.
    """
    items = latest_plan(events)
    if not items:
        return []
    return [TodoUpdated(session_id=compaction.session_id, run_id=compaction.run_id, items=items, carried=True)]


def plan_section(items: Sequence[TodoItem]) -> str:
    """What follows the summary in its turn: the heading and the plan, or nothing when there is no plan."""
    if not items:
        return ""
    return f"\n\n{PLAN_HEADING}\n{render_plan(items)}"
