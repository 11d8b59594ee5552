"""The plan's checklist from a real session: a scripted model writes its plan with ``loom__todo`` and marks it.

A real daemon, the TUI under Pilot: the checklist appears with the first write, follows each mark, and a second TUI
opening the session afterwards (at its end, the runs that wrote the plan not read) shows the same plan, from
``get_session``. Each update changes the checklist, never adds a line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from clients.tui.notice_line import NoticeLine
from clients.tui.todo_list import TodoList
from clients.tui.tool_block import ToolBlock
from tests.clients.cli_support import make_project, write_script
from tests.clients.tui.support import SIZE, connected, tui, type_message, until
from tests.orchestrator.daemon.daemon_process import running_daemon

pytestmark = pytest.mark.timeout(120)

PLAN = [
    {"text": "read the code", "status": "in_progress"},
    {"text": "write the flag", "status": "pending"},
    {"text": "test it", "status": "pending"},
]
TURNS: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "loom__todo", "arguments": {"items": PLAN}}]},
    {
        "delay_s": 1.0,  # the first plan stays on screen a moment: the test reads it
        "tool_calls": [
            {
                "name": "loom__todo",
                "arguments": {"marks": [{"item": 1, "status": "completed"}, {"item": 2, "status": "in_progress"}]},
            }
        ],
    },
    {
        "delay_s": 1.0,
        "tool_calls": [{"name": "loom__todo", "arguments": {"marks": [{"item": 2, "status": "completed"}]}}],
    },
    {"text": "Two of three done."},
    # A second run of some 250 events, then a third, short: a session opened again at its end reads its last page
    # of events (200) from the third run's start, so the run that wrote the plan is older history, not read.
    *(
        {
            "tool_calls": [
                {"name": "fs__read", "arguments": {"path": "README.md", "end_line": 60 * k + n + 1}} for n in range(60)
            ]
        }
        for k in range(4)
    ),
    {"text": "Read it all."},
    {"text": "Nothing to add."},
]


async def planned(home: Path, work: Path, model: str) -> tuple[list[list[str]], list[str], str]:
    """The checklist's lines at each stage, what a second TUI shows, and the plan-related notices."""
    stages: list[list[str]] = []
    app = tui(home, work, model)
    async with app.run_test(size=SIZE) as pilot:
        await connected(pilot)
        todo = app.query_one(TodoList)
        assert not todo.display  # no plan yet
        await type_message(pilot, "add the flag")
        await until(pilot, lambda: "[>] read the code" in todo.text, "the plan to be written")
        stages.append(todo.text.splitlines())
        await until(pilot, lambda: "[>] write the flag" in todo.text, "the first item marked done")
        stages.append(todo.text.splitlines())
        await until(pilot, lambda: app.status.run == "completed", "the run to end")
        stages.append(todo.text.splitlines())
        await type_message(pilot, "read the readme, all of it")
        await until(pilot, lambda: any(t.source == "Read it all." for t in app.conversation.texts), "run 2", 60)
        await until(pilot, lambda: app.status.run == "completed", "run 2 to end")
        await type_message(pilot, "anything else?")
        await until(
            pilot, lambda: any(t.source == "Nothing to add." for t in app.conversation.texts), "the 2nd run", 60
        )
        notices = [n.text for n in app.conversation.query(NoticeLine) if "plan" in n.text]
        session_id = app.session_id
    assert session_id is not None
    again = tui(home, work, model, session_id=session_id)
    async with again.run_test(size=SIZE) as pilot:
        await connected(pilot)
        reopened = again.query_one(TodoList)
        await until(pilot, lambda: reopened.display, "the reopened session's plan")
        await until(pilot, lambda: len(again.conversation.texts) == 1, "the last run shown")
        # Opened at its end: the runs that wrote the plan are older history, not read; get_session said the plan.
        assert again.conversation.has_older and not any("todo" in t.tool for t in again.query(ToolBlock))
        return stages, reopened.text.splitlines(), " ".join(notices)


def test_the_checklist_appears_follows_each_mark_and_is_there_when_the_session_is_opened_again(tmp_path: Path) -> None:
    work, home = make_project(tmp_path / "work"), tmp_path / "home"
    model = f"scripted:{write_script(tmp_path / 'plan.json', TURNS)}"
    with running_daemon(home, tmp_path):
        stages, reopened, notices = anyio.run(planned, home, work, model)
    assert stages[0] == ["plan 0/3 done", "[>] read the code", "[ ] write the flag", "[ ] test it"]
    assert stages[1] == ["plan 1/3 done", "[x] read the code", "[>] write the flag", "[ ] test it"]
    assert stages[2] == ["plan 2/3 done", "[x] read the code", "[x] write the flag", "[ ] test it"]
    assert reopened == stages[2]
    assert notices == ""  # the checklist, not a line per update
