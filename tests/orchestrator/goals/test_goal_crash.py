"""A ``loom serve`` daemon SIGKILLed during a goal's second work session, restarted with ``autoResume``: the goal
goes on from its events, the second session's run is resumed under its own id, the finished first one is not run
again, and the goal completes.

Each work session runs a counter (``n.txt``) that picks the verdict its grader will read. A scripted model restarts
its script when its session is reopened, so the work script is swapped while the goal runs: the first session
counts at once; the second, opened after the swap, is still thinking (before its count) when the daemon dies; after
the kill the script counts at once again, which is what the second session's resumed run plays.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from clients.loom import LoomClient
from orchestrator.events import ChildStarted, RunFinished
from tests.orchestrator.daemon.daemon_process import mcp_client, start_daemon
from tests.orchestrator.goals.loom_goals import (
    COUNT,
    GRADER_TURNS,
    WORK_TURNS,
    event_in,
    of_type,
    prepare,
    verdict,
    work_started,
    write_script,
)

pytestmark = pytest.mark.anyio


async def test_a_daemon_killed_mid_goal_resumes_it_without_running_a_finished_session_again(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    model = prepare(tmp_path, [verdict(True, False), verdict(True, True)])
    (home / "config.json").write_text(json.dumps({"autoResume": True}), encoding="utf-8")
    slow = [{"delay_s": 60, **WORK_TURNS[0]}, *WORK_TURNS[1:]]
    daemon = start_daemon(home, tmp_path)
    try:
        async with mcp_client(daemon, "auto") as client:
            face = LoomClient(client, on_daemon=True)
            started = await face.start_goal("count", ["counted", "twice"], cwd=str(work), mode="bypass", model=model)
            first = await work_started(face, started.session_id, 1)
            await event_in(face, first.child_session_id, of_type("tool_call_finished"))
            write_script(tmp_path / "work.json", slow)  # the next work session thinks for a minute before counting
            await event_in(face, first.child_session_id, of_type("run_finished"))
            second = await work_started(face, started.session_id, 2)
            await event_in(face, second.child_session_id, of_type("run_started"))
            before = await face.get_goal(started.goal_id)
    finally:
        daemon.proc.kill()  # SIGKILL: nothing is closed or recorded on the way out
        daemon.proc.wait(timeout=10)
        daemon.stop()
    assert (work / "n.txt").read_text().strip() == "1", "the second session must still be thinking when it dies"
    assert before.attempts[0].passed is False and before.status == "running"
    write_script(tmp_path / "work.json", WORK_TURNS)

    again = start_daemon(home, tmp_path, log_name="second")
    try:
        async with mcp_client(again, "auto") as client:
            face = LoomClient(client, on_daemon=True)
            with anyio.fail_after(45):
                done = await face.get_goal(started.goal_id, wait_s=40)
            runs = {
                a.session_id: sum(
                    1 for e in (await face.read_events(a.session_id, limit=1000)).events if e.type == "run_started"
                )
                for a in done.attempts
            }
            kids = [s for s in await face.list_sessions() if s.parent_session_id == done.session_id]
    finally:
        again.stop()
    assert done.status == "completed", done
    assert [a.session_id for a in done.attempts] == [a.session_id for a in before.attempts]  # no session redone
    assert list(runs.values()) == [1, 1]  # the killed session's run was resumed under its own id, not re-sent
    assert (work / "n.txt").read_text().strip() == "2"  # each session's count ran exactly once
    assert sorted(s.agent for s in kids) == ["", "", "grader", "grader"]


async def test_a_grading_the_daemon_was_killed_in_is_run_again_and_the_work_session_is_not(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    model = prepare(tmp_path, [verdict(True, True)])
    (home / "config.json").write_text(json.dumps({"autoResume": True}), encoding="utf-8")
    write_script(tmp_path / "grader.json", [{"delay_s": 60, **GRADER_TURNS[0]}, *GRADER_TURNS[1:]])
    daemon = start_daemon(home, tmp_path)
    try:
        async with mcp_client(daemon, "auto") as client:
            face = LoomClient(client, on_daemon=True)
            started = await face.start_goal("count", ["counted", "once"], cwd=str(work), mode="bypass", model=model)
            first = await work_started(face, started.session_id, 1)
            await event_in(face, first.child_session_id, of_type("run_finished"))
            grading = await event_in(face, started.session_id, lambda e: getattr(e, "agent", "") == "grader")
            assert isinstance(grading, ChildStarted)
            killed_grader = grading.child_session_id
            await event_in(face, killed_grader, of_type("run_started"))
    finally:
        daemon.proc.kill()
        daemon.proc.wait(timeout=10)
        daemon.stop()
    write_script(tmp_path / "grader.json", GRADER_TURNS)

    again = start_daemon(home, tmp_path, log_name="second")
    try:
        async with mcp_client(again, "auto") as client:
            face = LoomClient(client, on_daemon=True)
            with anyio.fail_after(45):
                done = await face.get_goal(started.goal_id, wait_s=40)
            killed_runs = await face.read_events(killed_grader, limit=1000)
    finally:
        again.stop()
    assert done.status == "completed", done
    assert [a.session_id for a in done.attempts] == [first.child_session_id]  # the work session was not redone
    assert done.attempts[0].grader_session_id != killed_grader  # the grading was, by a new grader
    ends = [e for e in killed_runs.events if e.type == "run_finished"]
    assert [getattr(e, "status", "") for e in ends][-1:] in (["cancelled"], ["completed"])
    assert (work / "n.txt").read_text().strip() == "1"


async def test_a_work_session_killed_in_a_command_is_graded_as_it_stands_not_left_waiting(tmp_path: Path) -> None:
    """Resumed headless, a run stopped mid-command would wait for a review nobody gives; the goal goes on instead."""
    home, work = tmp_path / "home", tmp_path / "work"
    model = prepare(tmp_path, [verdict(True, True)])
    (home / "config.json").write_text(json.dumps({"autoResume": True}), encoding="utf-8")
    slow = {"tool_calls": [{"name": "shell__run", "arguments": {"command": "sleep 30; " + COUNT}}]}
    write_script(tmp_path / "work.json", [slow, *WORK_TURNS[1:]])
    daemon = start_daemon(home, tmp_path)
    try:
        async with mcp_client(daemon, "auto") as client:
            face = LoomClient(client, on_daemon=True)
            started = await face.start_goal("count", ["counted", "once"], cwd=str(work), mode="bypass", model=model)
            first = await work_started(face, started.session_id, 1)
            await event_in(face, first.child_session_id, of_type("tool_call_started"))
    finally:
        daemon.proc.kill()
        daemon.proc.wait(timeout=10)
        daemon.stop()
    write_script(tmp_path / "work.json", WORK_TURNS)

    again = start_daemon(home, tmp_path, log_name="second")
    try:
        async with mcp_client(again, "auto") as client:
            face = LoomClient(client, on_daemon=True)
            with anyio.fail_after(45):
                done = await face.get_goal(started.goal_id, wait_s=40)
            killed = await face.read_events(first.child_session_id, limit=1000)
    finally:
        again.stop()
    assert done.status == "completed", done
    assert [a.passed for a in done.attempts] == [False, True]  # the cut-short session was graded, then one more
    ended = [e for e in killed.events if isinstance(e, RunFinished)]
    assert [e.status for e in ended] == ["interrupted", "cancelled"]  # marked at the restart; resumed, then cancelled
    assert any(e.type == "run_resumed" for e in killed.events)
    assert (work / "n.txt").read_text().strip() == "1"  # the killed command never ran again
