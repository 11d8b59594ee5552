"""An orchestration's task graph in the conversation: drawn from the session's events, live, and its report at the end.

Fed fixed events (as the daemon sends them on the orchestrating session's stream), without a daemon; one picture
(pytest-textual-snapshot) of a graph mid-run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from textual.pilot import Pilot

from clients.tui.graph_view import GraphBlock
from orchestrator.events import (
    OrchestrationFinished,
    OrchestrationStarted,
    PlannedTask,
    TaskGraphPlanned,
    TaskGraphPlanning,
    TaskState,
    TaskStateChanged,
)
from orchestrator.protocol import Event
from tests.clients.tui.scenes import SESSION, TS, ConversationApp, child_started, settle

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

OID = "orch_1a2b3c4d"
SnapCompare = Callable[..., bool]


def _started() -> OrchestrationStarted:
    return OrchestrationStarted(
        session_id=SESSION,
        ts=TS,
        orchestration_id=OID,
        goal="Add a --json flag to loom sessions\nwith tests and docs",
        max_parallel=2,
        task_timeout_s=600,
        max_attempts=3,
    )


def _task(task_id: str, title: str, *after: str) -> PlannedTask:
    return PlannedTask(id=task_id, title=title, brief=f"Do {task_id}.", depends_on=list(after), criteria=["it works"])


def _state(task_id: str, state: TaskState, attempt: int = 1, reason: str = "", *findings: str) -> TaskStateChanged:
    return TaskStateChanged(
        session_id=SESSION,
        ts=TS,
        orchestration_id=OID,
        task_id=task_id,
        state=state,
        attempt=attempt,
        reason=reason,
        findings=list(findings),
    )


def mid_run() -> list[Event]:
    """Planned after a second try; the flag passed, the tests re-queued once after a review, the docs wait."""
    return [
        _started(),
        TaskGraphPlanning(session_id=SESSION, ts=TS, orchestration_id=OID, attempt=1, child_session_id="s_plan"),
        TaskGraphPlanned(
            session_id=SESSION,
            ts=TS,
            orchestration_id=OID,
            tasks=[
                _task("flag", "Parse --json in loom sessions"),
                _task("tests", "Test the JSON output", "flag"),
                _task("docs", "Document the flag", "flag", "tests"),
                _task("changelog", "Note it in the changelog"),
            ],
        ),
        _state("flag", "running"),
        _state("changelog", "running"),
        _state("flag", "reviewing"),
        _state("flag", "passed"),
        _state("tests", "running"),
        _state("tests", "reviewing"),
        _state("tests", "ready", 1, "changes needed", "tests/test_sessions.py:40: no test of an empty list"),
        _state("tests", "running", 2),
        child_started("", "s_7e7e7e7e7e7e", "executor", "Test the JSON output", TS * 2),
    ]


def the_end() -> list[Event]:
    """The tests fail their last attempt, the docs are blocked by them, the changelog passes."""
    return [
        _state("changelog", "reviewing"),
        _state("changelog", "passed"),
        _state("tests", "reviewing", 3),
        _state("tests", "failed", 3, "changes needed after 3 attempts", "tests/test_sessions.py:40: still no test"),
        _state("docs", "blocked", 0, "its dependency 'tests' failed"),
        OrchestrationFinished(
            session_id=SESSION,
            ts=TS,
            orchestration_id=OID,
            status="failed",
            reason="2 of 4 tasks passed; 1 failed (tests), 1 blocked (docs)",
            counts={"passed": 2, "failed": 1, "blocked": 1},
        ),
    ]


def _graph(app: ConversationApp) -> GraphBlock:
    block = app.conversation.graph(OID)
    assert block is not None
    return block


async def test_the_graph_shows_each_tasks_state_attempt_and_dependencies_then_its_report() -> None:
    app = ConversationApp(mid_run())
    async with app.run_test(size=(100, 40)) as pilot:
        await settle(pilot)
        block = _graph(app)
        lines = block.text.splitlines()
        assert lines[0] == f"» orchestration {OID}  [running · 1/4 passed]"
        assert lines[1] == "Add a --json flag to loom sessions"
        assert lines[2].split() == [
            "✓",
            "flag",
            "passed",
            "attempt",
            "1/3",
            "Parse",
            "--json",
            "in",
            "loom",
            "sessions",
        ]
        assert lines[3].split() == [
            "●",
            "tests",
            "running",
            "attempt",
            "2/3",
            "Test",
            "the",
            "JSON",
            "output",
            "←",
            "flag",
        ]
        assert lines[4].split()[:4] == ["·", "docs", "pending", "Document"] and lines[4].endswith("← flag, tests")
        assert lines[5].split()[:5] == ["●", "changelog", "running", "attempt", "1/3"]
        assert "planner" not in block.text  # planned: the planning line is gone
        assert app.conversation.child("s_7e7e7e7e7e7e") is not None  # the executors' own blocks come below

        for event in the_end():  # live, as the follower delivers them
            app.conversation.show(event)
        await settle(pilot)
        lines = block.text.splitlines()
        assert lines[0] == f"» orchestration {OID}  [failed · 2/4 passed]"
        assert lines[3].split()[:5] == ["✗", "tests", "failed", "attempt", "3/3"]
        assert lines[4:6] == ["    changes needed after 3 attempts", "    * tests/test_sessions.py:40: still no test"]
        assert lines[6].split()[:3] == ["⊘", "docs", "blocked"]
        assert lines[7] == "    its dependency 'tests' failed"
        assert lines[-1] == "2 of 4 tasks passed; 1 failed (tests), 1 blocked (docs)"
        assert block.has_class("-failed")


async def test_a_graph_opened_mid_run_starts_from_what_it_reads_and_a_planners_problem_shows() -> None:
    planning: list[Event] = [
        _started(),
        TaskGraphPlanning(
            session_id=SESSION,
            ts=TS,
            orchestration_id=OID,
            attempt=2,
            child_session_id="s_plan",
            problem="task 'x' depends on 'y', which no task has as its id",
        ),
    ]
    app = ConversationApp(planning)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        text = _graph(app).text
        assert "[planning]" in text and "the planner writes the task graph (attempt 2)…" in text
        assert "its last answer: task 'x' depends on 'y'" in text

    hostile = _state("evil\x1b[2J", "running", 1, "\x1b]0;owned\x07")
    app = ConversationApp([hostile])  # its start (and plan) are before what was read
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        text = _graph(app).text
        assert "[running · 0/1 passed]" in text and "\x1b" not in text and "\x07" not in text


def test_a_graph_mid_run_picture(snap_compare: SnapCompare) -> None:
    async def shown(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        await pilot.pause(0.1)

    assert snap_compare(ConversationApp(mid_run()), terminal_size=(100, 30), run_before=shown)
