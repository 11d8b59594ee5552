"""How ``loom run`` / ``loom attach`` print long work for a person: the plan's changes, a goal's progress, hooks that
acted, loops, handoffs and notes carried over (``--json`` has every event as it is)."""

from __future__ import annotations

import io
import json

from clients.cli.render import JsonRenderer, TerminalRenderer
from orchestrator.events import Event, RunFinished, SessionCreated
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
    TodoItem,
    TodoStatus,
    TodoUpdated,
)

S, TS = "s_00000001", 1_700_000_000.0


def printed(*events: Event) -> tuple[str, list[str]]:
    out, err = io.StringIO(), io.StringIO()
    render = TerminalRenderer(out, err)
    for event in events:
        render(event)
    return out.getvalue(), err.getvalue().splitlines()


def plan(*items: tuple[str, TodoStatus]) -> TodoUpdated:
    return TodoUpdated(session_id=S, ts=TS, run_id="r_1", items=[TodoItem(text=t, status=s) for t, s in items])


def test_a_plan_is_printed_whole_when_written_then_only_the_items_marked() -> None:
    out, err = printed(
        plan(("read", "pending"), ("write", "pending")),
        plan(("read", "in_progress"), ("write", "pending")),
        plan(("read", "completed"), ("write", "in_progress")),
        plan(("read", "completed"), ("write", "in_progress")),  # nothing changed: nothing printed
        plan(),
    )
    assert out == ""
    assert err == [
        "loom: plan 0/2 done",
        "loom:   [ ] read",
        "loom:   [ ] write",
        "loom: plan 0/2 done: [>] read",
        "loom: plan 1/2 done: [x] read",
        "loom: plan 1/2 done: [>] write",
        "loom: plan cleared",
    ]


def test_a_run_stopped_for_looping_says_what_repeated_and_why_it_failed() -> None:
    calls = ['shell__run({"command": "make"})']
    _, err = printed(
        LoopDetected(session_id=S, ts=TS, run_id="r_1", step=3, action="notice", repeats=3, calls=calls),
        LoopDetected(session_id=S, ts=TS, run_id="r_1", step=5, action="stop", repeats=5, calls=calls),
        RunFinished(
            session_id=S,
            ts=TS,
            run_id="r_1",
            status="failed",
            reason="loop: the same call 5 times",
            steps=5,
            final_text="",
        ),
    )
    assert err == [
        'loom: warning: loop: shell__run({"command": "make"}) came round 3 times in a row (step 3); '
        "the model was told to change course",
        'loom: error: loop: shell__run({"command": "make"}) came round 5 times in a row (step 5); the run is stopped',
        "loom: run r_1 failed after 5 steps: loop: the same call 5 times",
    ]


def test_only_hooks_that_act_are_printed_and_what_they_print_is_made_safe() -> None:
    def hook(outcome: str, reason: str = "") -> HookRan:
        return HookRan.model_validate(
            {"session_id": S, "ts": TS, "hook_event": "PreToolUse", "command": "guard", "tool": "shell__run"}
            | {"outcome": outcome, "reason": reason, "exit_code": 2}
        )

    _, err = printed(hook("ok"), hook("allow"), hook("block", "no rm\x1b[2J here\nsecond line"))
    assert err == ["loom: warning: hook PreToolUse on shell__run blocked it: no rm [2J here (guard)"]


def test_a_goal_prints_its_sessions_each_verdict_per_criterion_and_its_end() -> None:
    verdicts = [
        CriterionVerdict(criterion="tests pass", passed=True, reason="exit 0"),
        CriterionVerdict(criterion="docs", passed=False, reason="no README change"),
    ]
    spent = GoalSpent(sessions=2, steps=20, tokens=9000, time_s=130)
    _, err = printed(
        GoalStarted(
            session_id=S,
            ts=TS,
            goal_id="g_1",
            goal="ship",
            criteria=["tests pass", "docs"],
            budget=GoalBudget(sessions=2),
        ),
        GoalSessionStarted(session_id=S, ts=TS, goal_id="g_1", attempt=1, child_session_id="s_w1", brief="ship"),
        GoalVerdict(
            session_id=S,
            ts=TS,
            goal_id="g_1",
            attempt=1,
            child_session_id="s_w1",
            grader_session_id="s_g1",
            passed=False,
            criteria=verdicts,
        ),
        GoalFinished(
            session_id=S, ts=TS, goal_id="g_1", status="failed", reason="budget spent", left=["docs"], spent=spent
        ),
    )
    assert err == [
        "loom: goal g_1: ship (budget: 2 sessions)",
        "loom:   [ ] tests pass",
        "loom:   [ ] docs",
        "loom: goal g_1: session 1 (s_w1) started",
        "loom: warning: goal g_1: session 1 graded: not yet (1/2 criteria)",
        "loom:   ✓ pass  tests pass: exit 0",
        "loom:   ✗ FAIL  docs: no README change",
        "loom: error: goal g_1 failed: budget spent (spent 2 sessions, 20 steps, 9,000 tokens, 2m 10s)",
        "loom:   left: docs",
    ]


def test_the_json_stream_carries_the_new_events_whole() -> None:
    out = io.StringIO()
    JsonRenderer(out)(plan(("read", "in_progress")))
    line = json.loads(out.getvalue())
    assert (line["type"], line["session_id"], line["items"]) == (
        "todo_updated",
        S,
        [{"text": "read", "status": "in_progress"}],
    )


def test_a_handoff_is_told_once_in_each_session_naming_the_other() -> None:
    old, new = "s_0ld00001", "s_new00002"
    written = HandoffWritten(session_id=old, ts=TS, to_session_id=new, text="## Goal and constraints\n- x")
    # The fresh session's stream holds a copy of the handoff (its history's seed) after its creation.
    created = SessionCreated(session_id=new, ts=TS, cwd="/w", model="scripted:x", handoff_from=old)
    copy = written.model_copy(update={"session_id": new, "from_session_id": old})
    old_out, old_err = printed(written)
    new_out, new_err = printed(created, copy)
    told = [line for line in old_err if line.strip()]
    assert len(told) == 1 and f"handed off to {new}" in told[0], old_err
    fresh = [line for line in new_err if line.strip()]
    assert len(fresh) == 1 and old in fresh[0] and "continues" in fresh[0], new_err
    assert not [line for line in new_err if f"handed off to {new}" in line]
