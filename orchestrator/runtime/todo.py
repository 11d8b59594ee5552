"""The model's plan: the ``todo`` tool of Loom's own ``loom`` server, and the plan as session state.

The model writes its plan whole (``items``) or marks items by number (``marks``) without sending the list again;
each change is a ``todo_updated`` event with the whole list, stored and streamed like every event, so each client
(the TUI's checklist, ``get_session``'s ``todos``) shows what the model is doing. The plan is the session's own:
a `SessionPlan` is built for one session, and the tool has no argument naming a session, so no model can write
another session's plan (a child's plan is the child's). It changes no file, process or service, only the
session's own record, which is why it is annotated read-only and runs in every policy mode, ``plan`` included.

Input is checked before anything is recorded, and a refusal says what to change. An open session keeps its plan
in memory (:attr:`SessionPlan.items`); a closed one's is read back from its events (`stored_plan`).
"""

from __future__ import annotations

import unicodedata
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Annotated

import anyio
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field
from pydantic.json_schema import SkipJsonSchema

from orchestrator.events import ContextCompacted
from orchestrator.events_long import TodoItem, TodoStatus, TodoUpdated
from orchestrator.store.eventlog import EventLog
from orchestrator.store.interface import Store

__all__ = [
    "MAX_ITEMS",
    "MAX_TEXT_CHARS",
    "TODO_ANNOTATIONS",
    "SessionPlan",
    "StoredPlans",
    "TodoMark",
    "TodoPlan",
    "TodoRefused",
    "apply_marks",
    "check_items",
    "stored_plan",
]

MAX_ITEMS = 50
"""The most items a plan may have: it is a checklist a person reads at a glance, not a log."""
MAX_TEXT_CHARS = 400
"""The longest item, in characters: one line of a checklist."""

TODO_ANNOTATIONS = ToolAnnotations(
    title="Plan", read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
"""Read-only toward everything outside the session (it changes no file, process or service, only the session's
own plan), so every mode runs it; idempotent, because writing a list or a status twice leaves the same plan."""

_PAGE = 256
"""Events read at a time when a closed session's plan is looked for from its end."""
_REMEMBERED = 256
"""Closed sessions whose plan `StoredPlans` keeps, the most recently asked for."""


class TodoRefused(ValueError):
    """A plan or a mark was refused; the message says what to change."""


class TodoMark(BaseModel):
    """A status change for one item of the plan."""

    item: int = Field(description="the item's number in the plan: 1 is the first")
    status: TodoStatus


class TodoPlan(BaseModel):
    """The plan as it now stands, after the call."""

    items: list[TodoItem]
    progress: str
    """How far it has got, in words (``2 of 5 completed; in progress: 3. Write the tests``)."""


def check_items(items: Sequence[TodoItem]) -> list[TodoItem]:
    """The items as the plan keeps them (each text stripped), or `TodoRefused` saying what is wrong."""
    if len(items) > MAX_ITEMS:
        raise TodoRefused(
            f"the plan has {len(items)} items; at most {MAX_ITEMS}: merge small steps into one, or leave out "
            "the ones finished long ago"
        )
    kept: list[TodoItem] = []
    for n, item in enumerate(items, 1):
        text = item.text.strip()
        if not text:
            raise TodoRefused(f"item {n} has no text; give each item a short line saying what it is")
        if len(text) > MAX_TEXT_CHARS:
            raise TodoRefused(
                f"item {n} is {len(text)} characters; at most {MAX_TEXT_CHARS}: keep an item to one short line "
                "(the detail belongs in your work, not the plan)"
            )
        if "\n" in text or "\r" in text:
            raise TodoRefused(f"item {n} is more than one line; make each line an item of its own")
        if any(unicodedata.category(c) in ("Cc", "Cf") for c in text):
            raise TodoRefused(f"item {n} holds control or formatting characters; write it as plain text")
        kept.append(TodoItem(text=text, status=item.status))
    _one_in_progress(kept)
    return kept


def apply_marks(items: Sequence[TodoItem], marks: Sequence[TodoMark]) -> list[TodoItem]:
    """The plan with ``marks`` applied together, or `TodoRefused` (nothing applied) saying what is wrong."""
    if not marks:
        raise TodoRefused("marks is empty: give at least one {item, status}, or items to write the whole plan")
    if not items:
        raise TodoRefused("there is no plan to mark yet: write it first with items")
    changed = list(items)
    seen: set[int] = set()
    for mark in marks:
        if not 1 <= mark.item <= len(items):
            raise TodoRefused(f"there is no item {mark.item}: the plan has {len(items)} items, numbered from 1")
        if mark.item in seen:
            raise TodoRefused(f"item {mark.item} is marked twice in one call; mark it once")
        seen.add(mark.item)
        changed[mark.item - 1] = TodoItem(text=items[mark.item - 1].text, status=mark.status)
    _one_in_progress(changed, marks)
    return changed


def _one_in_progress(items: Sequence[TodoItem], marks: Sequence[TodoMark] = ()) -> None:
    going = [n for n, item in enumerate(items, 1) if item.status == "in_progress"]
    if len(going) <= 1:
        return
    started = [m.item for m in marks if m.status == "in_progress"]
    left = [n for n in going if n not in started]
    if started and left:
        raise TodoRefused(
            f"item {left[0]} is still in_progress; only one item is in progress at a time: mark it in the same "
            f'call, e.g. marks=[{{"item": {left[0]}, "status": "completed"}}, '
            f'{{"item": {started[0]}, "status": "in_progress"}}]'
        )
    shown = ", ".join(map(str, going))
    raise TodoRefused(
        f"items {shown} are all in_progress; only one item is in progress at a time: mark the others pending or "
        "completed"
    )


def progress(items: Sequence[TodoItem]) -> str:
    """How far the plan has got, in words."""
    if not items:
        return "no plan"
    done = sum(item.status == "completed" for item in items)
    going = next((f"{n}. {item.text}" for n, item in enumerate(items, 1) if item.status == "in_progress"), "")
    return f"{done} of {len(items)} completed" + (f"; in progress: {going}" if going else "")


class SessionPlan:
    """One session's plan: the ``todo`` tool bound to it, and the plan as it stands.

    Args:
        session_id: the only session whose plan this is.
        log: where each change is recorded (and streamed); None for a server only listed, never called.
        items: the plan it starts with (a reopened session's, from its events).
        run_id: gives the run in progress, recorded with each change (None: none known).
    """

    def __init__(
        self,
        session_id: str,
        log: EventLog | None,
        items: Sequence[TodoItem] = (),
        *,
        run_id: Callable[[], str | None] | None = None,
    ) -> None:
        self.session_id = session_id
        self._log = log
        self._items = list(items)
        self._run_id = run_id
        # Calls of one batch run concurrently: each change is checked against, and made to, the plan the one
        # before it left.
        self._lock = anyio.Lock()

    @property
    def items(self) -> list[TodoItem]:
        """The plan as it now stands (a copy)."""
        return list(self._items)

    async def todo(
        self,
        items: Annotated[
            list[TodoItem] | SkipJsonSchema[None],
            Field(description=f"the whole plan in order (at most {MAX_ITEMS} items); replaces the plan; [] clears it"),
        ] = None,
        marks: Annotated[
            list[TodoMark] | SkipJsonSchema[None],
            Field(description="status changes by item number (1 is the first), applied together, without the list"),
        ] = None,
    ) -> TodoPlan:
        """Your plan for the task, which the user sees as a checklist: write it whole, then mark items as you go.

        Write the plan (items: [{text, status}], status pending, in_progress or completed) when a task has several
        steps; keep one item in_progress while you work on it, and mark it completed as soon as it is done
        (marks: [{item: 2, status: completed}, {item: 3, status: in_progress}]). Items are one short line each.
        Without items or marks, returns the plan as it stands. Your plan survives compaction word for word.
        """
        if items is not None and marks is not None:
            raise ToolError("give either items (the whole plan) or marks (changes by item number), not both")
        async with self._lock:
            if items is None and marks is None:
                return TodoPlan(items=self.items, progress=progress(self._items))
            try:
                new = check_items(items) if items is not None else apply_marks(self._items, marks or [])
            except TodoRefused as exc:
                raise ToolError(f"the plan was not changed: {exc}") from exc
            if self._log is None:
                raise ToolError("this plan belongs to no session; only a session's own loom server records one")
            run_id = self._run_id() if self._run_id is not None else None
            await self._log.append(TodoUpdated(session_id=self.session_id, run_id=run_id, items=new))
            self._items = new  # only once recorded: what the user is shown is what the model is told
            return TodoPlan(items=self.items, progress=progress(new))


async def stored_plan(store: Store, session_id: str, last_seq: int) -> list[TodoItem]:
    """A session's plan as its stored events leave it (for a session not open in this process).

    Read from the end, a page at a time, to the newest ``todo_updated``. A compaction records a non-empty plan
    again in its own batch (:mod:`orchestrator.context.plan`), so reaching a ``context_compacted`` first means the
    plan was empty then and has not been written since: nothing older is read.
    """
    before = last_seq + 1
    while before > 1:
        page = await store.read_events(session_id, before_seq=before, limit=_PAGE)
        for event in reversed(page):
            if isinstance(event, TodoUpdated):
                return list(event.items)
            if isinstance(event, ContextCompacted):
                return []
        if len(page) < _PAGE or page[0].seq is None:
            return []
        before = page[0].seq
    return []


class StoredPlans:
    """Closed sessions' plans as `stored_plan` found them, kept while the session's newest event stays the same.

    Reading a long session's log back to its plan costs a good part of a reopen (tens of milliseconds per thousand
    events); a client polling ``get_session`` pays it once per change of the session, not once per call.
    """

    def __init__(self, size: int = _REMEMBERED) -> None:
        self._size = size
        self._found: OrderedDict[str, tuple[int, list[TodoItem]]] = OrderedDict()

    async def plan(self, store: Store, session_id: str, last_seq: int) -> list[TodoItem]:
        """The session's plan as of ``last_seq`` (its newest stored event), read again only when that changed."""
        found = self._found.get(session_id)
        if found is not None and found[0] == last_seq:
            self._found.move_to_end(session_id)
            return list(found[1])
        items = await stored_plan(store, session_id, last_seq)
        self._found[session_id] = (last_seq, items)
        self._found.move_to_end(session_id)
        while len(self._found) > self._size:
            self._found.popitem(last=False)
        return list(items)
