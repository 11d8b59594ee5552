"""Goals over a real runtime: work sessions and graders are child sessions on scripted models, SQLite underneath."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from orchestrator.context.handoff import BLOCKS
from orchestrator.events_long import GoalBudget, GoalFinished, GoalSessionStarted, GoalStarted, GoalVerdict
from orchestrator.goals.grading import work_brief
from orchestrator.messages import TextBlock
from tests.orchestrator.goals.loom_goals import WORK_TURNS, event_in, loom, of_type, prepare, verdict, work_started

pytestmark = pytest.mark.anyio

CRITERIA = ["out.txt exists", "the tests pass"]


async def test_a_goal_that_needs_three_sessions_carries_each_verdicts_findings_into_the_next(tmp_path: Path) -> None:
    failing = verdict(True, False, reason="")
    first = failing.replace("criterion 2 is not met yet", "tests/test_x.py fails: 3 errors")
    second = failing.replace("criterion 2 is not met yet", "tests/test_x.py still fails on test_empty")
    work_model = prepare(tmp_path, [first, second, verdict(True, True)])
    async with loom(tmp_path) as (host, face):
        started = await face.start_goal(
            "make the tests pass", CRITERIA, cwd=str(tmp_path / "work"), mode="bypass", model=work_model
        )
        assert started.status == "running" and started.budget.sessions == 5
        with anyio.fail_after(60):
            done = await face.get_goal(started.goal_id, wait_s=50)
        models = {a.session_id: (await host.session(a.session_id)).model for a in done.attempts}
        events = list(await host.runtime.log.store.read_events(done.session_id))
        listed = await face.list_goals()
    assert done.status == "completed", done
    assert [a.passed for a in done.attempts] == [False, False, True]
    assert done.spent.sessions == 3 and done.spent.steps == 9 and done.left == []
    # What each work session's model received first: the goal, the criteria, and the previous verdict's findings.
    firsts = [models[a.session_id].requests[0].messages[0].text for a in done.attempts]  # type: ignore[attr-defined]
    assert all("make the tests pass" in text and "the tests pass" in text for text in firsts)
    assert "tests/test_x.py" not in firsts[0]
    assert "tests/test_x.py fails: 3 errors" in firsts[1]
    assert "still fails on test_empty" in firsts[2] and "fails: 3 errors" not in firsts[2]
    # The grader saw the evidence: the files written, the command and its output, the final answer.
    grader = await host.session(done.attempts[0].grader_session_id)
    brief = "".join(b.text for b in grader.model.requests[0].messages[0].content if isinstance(b, TextBlock))  # type: ignore[attr-defined]
    assert "- out.txt" in brief and "session 1" in brief and "Ran the counter" in brief and "2. the tests pass" in brief
    kinds = [type(e) for e in events if isinstance(e, GoalStarted | GoalSessionStarted | GoalVerdict | GoalFinished)]
    assert kinds == [GoalStarted] + [GoalSessionStarted, GoalVerdict] * 3 + [GoalFinished]
    assert [g.goal_id for g in listed] == [started.goal_id]


async def test_a_goal_out_of_sessions_fails_with_what_is_left(tmp_path: Path) -> None:
    work_model = prepare(tmp_path, [verdict(True, False)] * 3)
    async with loom(tmp_path) as (_, face):
        started = await face.start_goal(
            "make the tests pass",
            CRITERIA,
            budget=GoalBudget(sessions=2),
            cwd=str(tmp_path / "work"),
            mode="bypass",
            model=work_model,
        )
        with anyio.fail_after(60):
            done = await face.get_goal(started.goal_id, wait_s=50)
    assert done.status == "failed" and "2 sessions is spent" in done.reason, done
    assert len(done.attempts) == 2 and done.spent.sessions == 2
    assert done.left == ["the tests pass - criterion 2 is not met yet"]
    assert (tmp_path / "work" / "n.txt").read_text().strip() == "2"


async def test_cancelling_a_goal_cancels_its_running_work_session_and_records_what_is_left(tmp_path: Path) -> None:
    work_model = prepare(tmp_path, [verdict(True, True)], work=[{"delay_s": 60, "text": "never"}])
    async with loom(tmp_path) as (host, face):
        started = await face.start_goal("wait", CRITERIA, cwd=str(tmp_path / "work"), model=work_model)
        first = await work_started(face, started.session_id, 1)
        work = first.child_session_id
        await event_in(face, work, of_type("run_started"))
        with anyio.fail_after(30):
            cancelled = await face.cancel_goal(started.goal_id)
        runs = await host.runtime.log.store.list_runs(work)
        with pytest.raises(Exception, match="already ended cancelled"):
            await face.cancel_goal(started.goal_id)
    assert cancelled.status == "cancelled" and cancelled.reason == "cancelled by a client"
    assert cancelled.left == [f"{c} - not judged yet" for c in CRITERIA]
    assert cancelled.spent.sessions == 1 and cancelled.spent.time_s > 0  # the ungraded session counted too
    assert [r.status for r in runs] == ["cancelled"]


async def test_a_goal_without_criteria_or_with_a_bad_budget_is_refused_before_anything_is_made(tmp_path: Path) -> None:
    prepare(tmp_path, [])
    async with loom(tmp_path) as (_, face):
        with pytest.raises(Exception, match="at least one acceptance criterion"):
            await face.start_goal("g", ["  "], cwd=str(tmp_path / "work"))
        with pytest.raises(Exception, match="sessions must be more than 0"):
            await face.start_goal("g", ["c"], budget=GoalBudget(sessions=0), cwd=str(tmp_path / "work"))
        sessions = await face.list_sessions()
        goals = await face.list_goals()
    assert sessions == [] and goals == []


async def test_an_unreadable_verdict_is_asked_again_once_then_fails_the_attempt_saying_so(tmp_path: Path) -> None:
    work_model = prepare(tmp_path, ["I think it is fine."])  # and asked again, the script has nothing more to say
    async with loom(tmp_path) as (_, face):
        started = await face.start_goal(
            "g", CRITERIA, budget=GoalBudget(sessions=1), cwd=str(tmp_path / "work"), model=work_model, mode="bypass"
        )
        with anyio.fail_after(60):
            done = await face.get_goal(started.goal_id, wait_s=50)
        grader = done.attempts[0].grader_session_id
        asked = [e for e in (await face.read_events(grader)).events if e.type == "user_message"]
    assert done.status == "failed" and done.attempts[0].passed is False
    assert all("could not be read as a verdict, twice: it is not JSON" in c.reason for c in done.attempts[0].criteria)
    assert len(asked) == 2 and "could not be read as a verdict" in asked[1].text


async def test_a_work_session_past_the_watermark_is_continued_through_a_handoff(tmp_path: Path) -> None:
    prepare(tmp_path, [verdict(True, False, reason="do it again"), verdict(True, True)])
    # The work model's window is small (its context holds some 5,000 tokens of 20,000: past the watermark set at 0.05,
    # short of compacting at 0.8), so the first session is continued through a handoff, which quotes its brief.
    brief = work_brief("g", CRITERIA, attempt=1)
    blocks = dict.fromkeys(BLOCKS, "none") | {"Goal and constraints": brief}
    handoff = "\n\n".join(f"## {name}\n{body}" for name, body in blocks.items())
    # The fresh session carries on with the old one's model: the script's second half is its turns.
    script = {"context_window": 20_000, "turns": WORK_TURNS * 2, "summaries": [{"text": handoff}]}
    (tmp_path / "work.json").write_text(json.dumps(script))
    work_model = f"scripted:{tmp_path / 'work.json'}"
    (tmp_path / "home" / "config.json").write_text(json.dumps({"goals": {"handoffAt": 0.05}}))
    async with loom(tmp_path) as (host, face):
        started = await face.start_goal("g", CRITERIA, cwd=str(tmp_path / "work"), model=work_model, mode="bypass")
        with anyio.fail_after(60):
            done = await face.get_goal(started.goal_id, wait_s=50)
        assert len(done.attempts) == 2, done
        first, second = (a.session_id for a in done.attempts)
        fresh = await host.session(second)
        old = await face.get_session(first)
        written = [e for e in (await face.read_events(first, limit=1000)).events if e.type == "handoff_written"]
    assert done.status == "completed", done
    assert done.attempts[1].handoff_from == first and done.attempts[0].handoff_from == ""
    assert old.archived  # the handed-off session is kept, archived
    assert [getattr(e, "trigger", "") for e in written] == ["goal"]
    turns = [r for r in fresh.model.requests if r.purpose == "turn"]  # type: ignore[attr-defined]
    received = "\n".join(m.text for m in turns[len(WORK_TURNS)].messages)  # the fresh session's first request
    assert "## State of files and systems" in received and "continues a goal" in received  # the handoff, carried
    assert "do it again" in received  # and the brief with the last verdict's findings


async def test_the_steps_left_bound_the_next_session_and_a_spent_step_budget_fails_the_goal(tmp_path: Path) -> None:
    work_model = prepare(tmp_path, [verdict(True, False)] * 2)
    async with loom(tmp_path) as (host, face):
        started = await face.start_goal(
            "g", CRITERIA, budget=GoalBudget(steps=4), cwd=str(tmp_path / "work"), model=work_model, mode="bypass"
        )
        with anyio.fail_after(60):
            done = await face.get_goal(started.goal_id, wait_s=50)
        second = done.attempts[1].session_id
        runs = await host.runtime.log.store.list_runs(second)
        with pytest.raises(Exception, match="no goal 'goal_nope'; list_goals shows the goals there are"):
            await face.get_goal("goal_nope")
    # The first session took its 3 steps; the second was bounded by the 1 left, and then the budget was spent.
    assert done.status == "failed" and "its budget of 4 steps is spent (4 used)" in done.reason, done
    assert len(done.attempts) == 2 and done.spent.steps == 4
    assert [r.reason.split(":")[0] for r in runs] == ["max_steps"]


async def test_at_the_end_the_work_sessions_notes_are_promoted_to_the_project(tmp_path: Path) -> None:
    note = {"namespace": "session", "key": "build", "body": "make test runs the suite"}
    turns = [{"tool_calls": [{"name": "memory__set", "arguments": note}]}, *WORK_TURNS]
    work_model = prepare(tmp_path, [verdict(True, True)], work=turns)
    async with loom(tmp_path) as (_, face):
        started = await face.start_goal("g", CRITERIA, cwd=str(tmp_path / "work"), model=work_model, mode="bypass")
        with anyio.fail_after(60):
            done = await face.get_goal(started.goal_id, wait_s=50)
        events = (await face.read_events(done.attempts[0].session_id, limit=1000)).events
    assert done.status == "completed", done
    archived = [e for e in events if e.type == "memory_archived"]
    assert [(getattr(e, "to_namespace", ""), getattr(e, "keys", [])) for e in archived] == [("project", ["build"])]


async def test_the_time_left_is_the_work_sessions_deadline_and_a_spent_time_budget_fails_the_goal(
    tmp_path: Path,
) -> None:
    work_model = prepare(tmp_path, [verdict(True, True)], work=[{"delay_s": 60, "text": "never"}])
    async with loom(tmp_path) as (host, face):
        started = await face.start_goal(
            "g", CRITERIA, budget=GoalBudget(time_s=2), cwd=str(tmp_path / "work"), model=work_model, mode="bypass"
        )
        with anyio.fail_after(30):
            done = await face.get_goal(started.goal_id, wait_s=25)
        runs = await host.runtime.log.store.list_runs(done.attempts[0].session_id)
    assert done.status == "failed" and "its time budget of 2s is spent" in done.reason, done
    assert len(done.attempts) == 1 and done.spent.time_s >= 2
    assert [r.reason.startswith("timed out after 2 s") for r in runs] == [
        True
    ]  # the minute-long thought was cut at the time left
