"""Long work in the conversation: a goal's block from its events, and the lines of hooks, loops and handoffs.

Fed fixed events, as the daemon sends them on a session's stream, without a daemon (the end-to-end runs of
``/goal`` and ``/handoff`` are in test_tui_goal_command.py and test_tui_handoff_command.py); one picture
(pytest-textual-snapshot) of a goal mid-run over a long plan's checklist.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from textual.app import ComposeResult
from textual.pilot import Pilot

from clients.tui.goal_view import GoalBlock
from clients.tui.notice_line import NoticeLine
from clients.tui.todo_list import TodoList
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
    TodoUpdated,
)
from orchestrator.protocol import Event
from tests.clients.tui.scenes import SESSION, TS, ConversationApp, settle

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

SnapCompare = Callable[..., bool]
GID = "g_1a2b3c4d"
CRITERIA = ["the tests pass", "the README documents --json"]


def _verdict(attempt: int, *passed: bool, findings: str = "") -> GoalVerdict:
    reasons = ["pytest exited 0" if p else "pytest: 2 failed" for p in passed[:1]]
    reasons += ["README has a --json section" if p else "README never mentions --json" for p in passed[1:]]
    return GoalVerdict(
        session_id=SESSION,
        ts=TS,
        goal_id=GID,
        attempt=attempt,
        child_session_id=f"s_work{attempt}",
        grader_session_id=f"s_grade{attempt}",
        passed=all(passed),
        criteria=[
            CriterionVerdict(criterion=c, passed=p, reason=r) for c, p, r in zip(CRITERIA, passed, reasons, strict=True)
        ],
        findings=findings,
        spent=GoalSpent(sessions=attempt, steps=12 * attempt, tokens=4000 * attempt, time_s=95.0 * attempt),
    )


def three_sessions() -> list[Event]:
    started = GoalStarted(
        session_id=SESSION, ts=TS, goal_id=GID, goal="Add --json", criteria=CRITERIA, budget=GoalBudget(sessions=5)
    )
    events: list[Event] = [started]
    for attempt, passed in ((1, (False, False)), (2, (True, False))):
        events.append(
            GoalSessionStarted(
                session_id=SESSION, ts=TS, goal_id=GID, attempt=attempt, child_session_id=f"s_work{attempt}", brief=""
            )
        )
        events.append(_verdict(attempt, *passed, findings="README never mentions --json"))
    events.append(
        GoalSessionStarted(session_id=SESSION, ts=TS, goal_id=GID, attempt=3, child_session_id="s_work3", brief="")
    )
    return events


async def test_a_goal_block_shows_each_criterion_as_last_judged_and_each_session() -> None:
    app = ConversationApp(three_sessions())
    async with app.run_test(size=(100, 40)) as pilot:
        await settle(pilot)
        block = app.conversation.goal(GID)
        assert isinstance(block, GoalBlock)
        assert block.text.splitlines() == [
            f"» goal {GID}  [running · session 3 of 5]",
            "Add --json",
            "✓ pass  the tests pass: pytest exited 0",
            "✗ FAIL  the README documents --json: README never mentions --json",
            "session 1 s_work1: 2 criteria failed — README never mentions --json",
            "session 2 s_work2: 1 criterion failed — README never mentions --json",
            "session 3 s_work3: working or being graded…",
            "spent 2 sessions, 24 steps, 8,000 tokens, 3m 10s of 5 sessions",
            "/goal cancel ends it",
        ]
        app.conversation.show(_verdict(3, True, True))
        done = GoalSpent(sessions=3, steps=36, tokens=12000, time_s=285.0)
        app.conversation.show(
            GoalFinished(
                session_id=SESSION, ts=TS, goal_id=GID, status="completed", reason="every criterion passed", spent=done
            )
        )
        await pilot.pause()
        lines = block.text.splitlines()
        assert lines[0] == f"» goal {GID}  [completed]"
        assert lines[2:4] == [
            "✓ pass  the tests pass: pytest exited 0",
            "✓ pass  the README documents --json: README has a --json section",
        ]
        assert lines[-1] == "every criterion passed" and block.has_class("-completed")


async def test_a_goal_out_of_budget_ends_failed_with_what_is_left() -> None:
    events = three_sessions()[:5]
    events.append(
        GoalFinished(
            session_id=SESSION,
            ts=TS,
            goal_id=GID,
            status="failed",
            reason="the session budget (2) is spent",
            left=["the README documents --json: README never mentions --json"],
        )
    )
    app = ConversationApp(events)
    async with app.run_test(size=(100, 40)) as pilot:
        await settle(pilot)
        block = app.conversation.goal(GID)
        assert block is not None and block.status == "failed" and block.has_class("-failed")
        assert block.text.splitlines()[-2:] == [
            "the session budget (2) is spent",
            "left: the README documents --json: README never mentions --json",
        ]


def _hook(outcome: str, **extra: object) -> HookRan:
    fields = {"session_id": SESSION, "ts": TS, "run_id": "r_1", "hook_event": "PreToolUse", "command": "./guard.sh"}
    return HookRan.model_validate({**fields, "tool": "shell__run", "outcome": outcome, **extra})


async def test_hooks_that_act_loops_and_handoffs_are_lines_and_quiet_hooks_and_plan_updates_are_not() -> None:
    events: list[Event] = [
        _hook("ok", exit_code=0),
        _hook("allow", exit_code=0),
        _hook("deny", exit_code=2, reason="rm is not allowed here"),
        _hook("rewrite", exit_code=0),
        _hook("error", exit_code=None, reason="timed out after 10 s"),
        TodoUpdated(session_id=SESSION, ts=TS, run_id="r_1", items=[TodoItem(text="a")]),
        LoopDetected(
            session_id=SESSION,
            ts=TS,
            run_id="r_1",
            step=4,
            action="notice",
            repeats=3,
            calls=['fs__read({"path": "a"})'],
        ),
        LoopDetected(
            session_id=SESSION, ts=TS, run_id="r_1", step=6, action="stop", repeats=5, calls=['fs__read({"path": "a"})']
        ),
        MemoryArchived(
            session_id=SESSION,
            ts=TS,
            from_namespace="session:s_00000001",
            to_namespace="project",
            keys=["build", "tests"],
        ),
        HandoffWritten(
            session_id=SESSION, ts=TS, to_session_id="s_fresh", text="## Goal\n…", instructions=["keep the API"]
        ),
        SessionCreated(session_id=SESSION, ts=TS, cwd="/w", model="scripted:x", mode="ask", handoff_from="s_old"),
    ]
    app = ConversationApp(events)
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        lines = [(n.text, [c for c in n.classes if c.startswith("-")]) for n in app.conversation.query(NoticeLine)]
    assert lines == [
        ("hook PreToolUse on shell__run denied the call: rm is not allowed here (./guard.sh)", ["-warning"]),
        ("hook PreToolUse on shell__run rewrote the call's arguments (./guard.sh)", ["-warning"]),
        (
            "hook PreToolUse on shell__run failed (timed out or could not start): timed out after 10 s (./guard.sh); "
            "a failed hook blocks unless its onError is allow",
            ["-error"],
        ),
        (
            'loop: fs__read({"path": "a"}) came round 3 times in a row (step 4); the model was told to change course',
            ["-warning"],
        ),
        ('loop: fs__read({"path": "a"}) came round 5 times in a row (step 6); the run is stopped', ["-error"]),
        ("memory: 2 notes carried from session:s_00000001 to project: build, tests", ["-info"]),
        (
            "handed off to s_fresh: a fresh session continues from the handoff, with 1 instruction of yours verbatim; "
            "this one is archived (loom handoff --show s_fresh reads it)",
            ["-info"],
        ),
        ("this session continues s_old from its handoff (the old one is archived)", ["-info"]),
    ]


class LongWorkApp(ConversationApp):
    """The conversation over the plan's checklist, as the TUI lays them out."""

    def __init__(self, events: list[Event], plan: TodoUpdated) -> None:
        super().__init__(events)
        self.plan = plan

    def compose(self) -> ComposeResult:
        yield from super().compose()
        yield TodoList()

    def on_mount(self) -> None:  # Textual calls ConversationApp's on_mount too (it shows the events)
        self.query_one(TodoList).observe(self.plan)


def test_a_goal_mid_run_over_the_plan_picture(snap_compare: SnapCompare) -> None:
    items = [("read the CLI's sessions command", "completed"), ("parse --json", "completed")]
    items += [("print the sessions as JSON", "in_progress"), ("test an empty list", "pending")]
    items += [(f"document step {n}", "pending") for n in range(1, 6)]
    plan = TodoUpdated(
        session_id=SESSION,
        ts=TS,
        run_id="r_1",
        items=[TodoItem(text=t, status=s) for t, s in items],
    )

    async def shown(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        await pilot.pause(0.1)

    assert snap_compare(LongWorkApp(three_sessions(), plan), terminal_size=(100, 30), run_before=shown)
