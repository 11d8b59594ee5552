"""The plan's checklist over the prompt: hidden with no plan, each item marked, bounded with the item in progress.

A tiny app holding the checklist, fed ``todo_updated`` events as the daemon sends them on a session's stream (the
end-to-end test of the ``todo`` tool through a real daemon is in test_tui_todo_session.py).
"""

from __future__ import annotations

import pytest
from textual.app import App, ComposeResult

from clients.tui.todo_list import MOST_LINES, TodoList, visible_items
from orchestrator.events_long import TodoItem, TodoStatus, TodoUpdated
from tests.clients.tui.scenes import CSS, SESSION, TS

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


class PlanApp(App[None]):
    """Just the checklist, with Loom's styles."""

    CSS_PATH = str(CSS)

    def compose(self) -> ComposeResult:
        yield TodoList()


def plan(*items: tuple[str, TodoStatus]) -> TodoUpdated:
    return TodoUpdated(session_id=SESSION, ts=TS, run_id="r_1", items=[TodoItem(text=t, status=s) for t, s in items])


async def test_the_checklist_is_hidden_without_a_plan_and_marks_each_item_without_colour() -> None:
    app = PlanApp()
    async with app.run_test(size=(80, 24)) as pilot:
        todo = app.query_one(TodoList)
        assert not todo.display and todo.text == ""
        todo.observe(plan(("read the code", "completed"), ("write the flag", "in_progress"), ("test it", "pending")))
        await pilot.pause()
        assert todo.display
        assert todo.text.splitlines() == [
            "plan 1/3 done",
            "[x] read the code",
            "[>] write the flag",
            "[ ] test it",
        ]
        assert todo.region.height == 4  # its lines, no more
        todo.observe(plan(("read the code", "completed"), ("write the flag", "completed"), ("test it", "completed")))
        await pilot.pause()
        assert todo.text == "plan 3/3 done  ✓ all done"  # a finished plan keeps one line
        todo.observe(plan())
        await pilot.pause()
        assert not todo.display  # the model cleared its plan


async def test_a_long_plan_stays_bounded_with_the_item_in_progress_in_view() -> None:
    def status(n: int) -> TodoStatus:
        return "completed" if n < 30 else "in_progress" if n == 30 else "pending"

    items = [(f"step {n}", status(n)) for n in range(60)]
    app = PlanApp()
    async with app.run_test(size=(80, 24)) as pilot:
        todo = app.query_one(TodoList)
        todo.observe(plan(*items))
        await pilot.pause()
        lines = todo.text.splitlines()
        assert lines[0] == f"plan 30/60 done  (… 29 above, {60 - 29 - MOST_LINES} below)"
        assert lines[1:3] == ["[x] step 29", "[>] step 30"]
        assert len(lines) == MOST_LINES + 1 == todo.region.height


async def test_what_get_session_said_never_replaces_a_newer_update_from_the_stream() -> None:
    app = PlanApp()
    async with app.run_test(size=(80, 24)) as pilot:
        todo = app.query_one(TodoList)
        todo.show_plan([TodoItem(text="old plan", status="in_progress")])  # opened at its end: the last update not read
        await pilot.pause()
        assert "[>] old plan" in todo.text
        todo.observe(plan(("new plan", "in_progress")))
        todo.show_plan([TodoItem(text="old plan", status="in_progress")])  # a late answer, read before the update
        await pilot.pause()
        assert "[>] new plan" in todo.text and "old plan" not in todo.text
        todo.reset()  # another session shown: its get_session counts again
        todo.show_plan([TodoItem(text="other session's plan")])
        await pilot.pause()
        assert todo.text.splitlines()[1] == "[ ] other session's plan"


async def test_a_hostile_plan_draws_one_safe_line_per_item() -> None:
    app = PlanApp()
    async with app.run_test(size=(80, 24)) as pilot:
        todo = app.query_one(TodoList)
        todo.observe(plan(("\x1b]0;pwned\x07rm -rf /\nsecond line", "in_progress"), ("x" * 10_000, "pending")))
        await pilot.pause()
        lines = todo.text.splitlines()
        assert len(lines) == 3 and "\x1b" not in todo.text and "\x07" not in todo.text
        assert "second line" not in todo.text and len(lines[2]) < 200


def test_the_window_leads_with_the_next_pending_item_when_none_is_in_progress() -> None:
    items = [TodoItem(text=str(n), status="completed" if n < 10 else "pending") for n in range(20)]
    assert visible_items(items, 5) == (9, 14)
    assert visible_items([TodoItem(text=str(n), status="completed") for n in range(20)], 5) == (15, 20)
    assert visible_items(items[:3], 5) == (0, 3)
