"""``/goal`` against a real daemon, with scripted work sessions and grader.

Each work session runs a counter and copies that attempt's verdict for the grader, which answers with it
(tests/orchestrator/goals/loom_goals.py), so the test decides each verdict; the TUI shows the goal's session, whose
block follows the goal to its end.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from clients.tui.app import LoomApp
from clients.tui.goal_view import GoalBlock
from clients.tui.notice_line import NoticeLine
from clients.tui.prompt import Prompt
from tests.clients.tui.support import connected, tui, type_message, until
from tests.orchestrator.daemon.daemon_process import running_daemon
from tests.orchestrator.goals.loom_goals import WORK_TURNS, prepare, verdict

pytestmark = pytest.mark.timeout(180)

GOAL = '/goal count the sessions --accept "the first holds" --accept "the second holds" --budget sessions=3'


def notices(app: LoomApp) -> list[str]:
    return [n.text for n in app.conversation.query(NoticeLine)]


async def goal_run(home: Path, work: Path, model: str, line: str, cancel: bool = False) -> tuple[str, list[str], str]:
    """The goal block's text at its end, the notices shown, and the session shown."""
    app = tui(home, work, model, mode="bypass")
    async with app.run_test(size=(100, 40)) as pilot:
        await connected(pilot)
        await type_message(pilot, line)
        await until(pilot, lambda: bool(app.query(GoalBlock)), "the goal's block", 30)
        (block,) = app.query(GoalBlock)
        if cancel:
            await until(pilot, lambda: "session 1" in block.text, "the first work session")
            await type_message(pilot, "/goal cancel")
        await until(pilot, lambda: block.status != "running", "the goal to end", 120)
        await type_message(pilot, "/goal")
        await until(pilot, lambda: any(n.startswith(f"goal {block.goal.goal_id} ") for n in notices(app)), "/goal")
        assert app.session_id is not None
        return block.text, notices(app), app.session_id


def test_goal_shows_its_sessions_and_each_verdict_until_every_criterion_passes(tmp_path: Path) -> None:
    model = prepare(tmp_path, [verdict(False, False), verdict(True, False), verdict(True, True)])
    home, work = tmp_path / "home", tmp_path / "work"
    with running_daemon(home, tmp_path):
        text, said, shown = anyio.run(goal_run, home, work, model, GOAL)
    lines = text.splitlines()
    assert lines[0].startswith("» goal ") and lines[0].endswith("[completed]")
    assert lines[1] == "count the sessions"
    assert lines[2].startswith("✓ pass  the first holds") and lines[3].startswith("✓ pass  the second holds")
    sessions = [line for line in lines if line.startswith("session ")]
    assert [s.split(": ", 1)[1].split(" — ")[0] for s in sessions] == [
        "2 criteria failed",
        "1 criterion failed",
        "every criterion passed",
    ]
    assert lines[-2].startswith("spent 3 sessions") and lines[-2].endswith("of 3 sessions")
    started = next(n for n in said if "started in its own session" in n)
    assert f"its own session {shown}:" in started  # the TUI shows the goal's session
    status = next(n for n in said if n.startswith("goal ") and " completed" in n.splitlines()[0])
    assert "session 3" in status and "passed" in status.splitlines()[-1]


def test_goal_cancel_ends_the_goal_of_the_session_shown(tmp_path: Path) -> None:
    slow = [{**WORK_TURNS[0], "delay_s": 60}, *WORK_TURNS[1:]]  # the first work session is still thinking
    model = prepare(tmp_path, [verdict(True, True)], work=slow)
    home, work = tmp_path / "home", tmp_path / "work"
    with running_daemon(home, tmp_path):
        text, said, _ = anyio.run(goal_run, home, work, model, GOAL, True)
    assert text.splitlines()[0].endswith("[cancelled]")
    assert any(n.startswith("goal ") and n.endswith(": cancelled") for n in said), said


def test_a_goal_line_that_cannot_start_says_what_to_type_and_stays_in_the_prompt(tmp_path: Path) -> None:
    home = tmp_path / "home"

    async def refused() -> tuple[list[str], str]:
        app = tui(home, tmp_path, "scripted:demo")
        async with app.run_test(size=(100, 30)) as pilot:
            await connected(pilot)
            await type_message(pilot, "/goal ship it")
            await until(pilot, lambda: bool(notices(app)), "the refusal")
            return notices(app), app.query_one(Prompt).text

    with running_daemon(home, tmp_path):
        said, prompt = anyio.run(refused)
    assert said == [
        '/goal: give at least one --accept "criterion" the grader can check; usage: /goal GOAL --accept "criterion" '
        "[--accept ...] [--budget sessions=N,steps=N,tokens=N,time=30m]"
    ]
    assert prompt == "/goal ship it"
