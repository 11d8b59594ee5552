"""``loom goal`` and ``loom goals`` end to end: the real CLI process, a face in it (or the daemon's), scripted models.

The work sessions' and the grader's scripts are those of the goal tests (:mod:`tests.orchestrator.goals.loom_goals`):
each work session counts itself in ``n.txt`` and copies ``verdicts/N.json`` for its grader to answer with.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import anyio

from clients.loom import LoomClient
from orchestrator.protocol_long import GoalReport
from tests.clients.cli_support import clean_env, loom_command, run_loom
from tests.orchestrator.daemon.daemon_process import Daemon, mcp_client, running_daemon, start_daemon
from tests.orchestrator.goals.loom_goals import WORK_TURNS, prepare, verdict, write_script

GOAL = ("goal", "count the sessions", "--accept", "counted", "--accept", "twice", "--mode", "bypass")


def test_a_goal_prints_each_session_and_verdict_then_the_report_and_exits_0_once_completed(tmp_path: Path) -> None:
    model = prepare(tmp_path, [verdict(True, False, reason="not yet twice"), verdict(True, True)])
    home, work = tmp_path / "home", tmp_path / "work"
    done = run_loom(*GOAL, "--model", model, "--budget", "sessions=3,time=10m", cwd=work, home=home, timeout_s=90)
    assert done.returncode == 0, done
    lines = done.stdout.splitlines()
    assert lines[0].startswith("session 1: s_") and "verdict 1: failed (1/2)" in lines
    assert "  [FAIL] twice - not yet twice" in lines  # the reason given for each criterion
    assert (
        "verdict 2: passed (2/2)" in lines and "finished: completed - every criterion passed after 2 sessions" in lines
    )
    assert any(
        line.startswith("goal goal_") and line.endswith(": completed - every criterion passed after 2 sessions")
        for line in lines
    )
    assert any(line.startswith("  spent: sessions 2/3, steps 6, ") and line.endswith("/10m") for line in lines)
    goal_id = next(line.split()[1].rstrip(":") for line in lines if line.startswith("goal goal_"))

    listed = run_loom("goals", cwd=work, home=home)
    shown = run_loom("goal", "--show", goal_id, cwd=work, home=home)
    assert listed.returncode == 0, listed
    assert listed.stdout.startswith(
        f"{goal_id}  completed  2 attempts  sessions 2/3, steps 6"
    ) and listed.stdout.rstrip().endswith("count the sessions")
    assert shown.returncode == 0 and "attempt 1: failed in s_" in shown.stdout and "attempt 2: passed" in shown.stdout


def test_a_goal_whose_budget_runs_out_exits_1_with_what_is_left(tmp_path: Path) -> None:
    model = prepare(tmp_path, [verdict(True, False, reason="counted once only")] * 2)
    home, work = tmp_path / "home", tmp_path / "work"
    done = run_loom(*GOAL, "--model", model, "--budget", "sessions=2", cwd=work, home=home, timeout_s=90)
    assert done.returncode == 1, done
    assert "finished: failed - not every criterion was met and its budget of 2 sessions is spent" in done.stdout
    assert "  left: twice - counted once only" in done.stdout.splitlines()


def test_a_bad_budget_or_no_criterion_is_refused_with_a_clear_error_and_nothing_runs(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir(parents=True)
    bad = run_loom("goal", "g", "--accept", "c", "--budget", "time=soon", cwd=work, home=home)
    none = run_loom("goal", "g", cwd=work, home=home)
    two = run_loom("goal", "make", "it", "--accept", "c", cwd=work, home=home)
    assert (
        bad.returncode == 2
        and "--budget: time='soon' is not a duration; write it like 90s, 30m, 2h or 1d" in bad.stderr
    )
    assert none.returncode == 2 and "at least one acceptance criterion: --accept" in none.stderr
    assert two.returncode == 2 and "give the goal as one quoted argument" in two.stderr
    assert run_loom("goals", cwd=work, home=home).stdout.startswith("no goals yet")
    unknown = run_loom("goal", "--show", "goal_nope", cwd=work, home=home)
    assert unknown.returncode == 2 and "no goal 'goal_nope'; `loom goals` lists them" in unknown.stderr, unknown


def test_on_the_daemon_a_detached_goal_is_listed_running_and_cancelled_by_id(tmp_path: Path) -> None:
    model = prepare(tmp_path, [verdict(True, True)], work=[{"delay_s": 60, "text": "never"}])
    home, work = tmp_path / "home", tmp_path / "work"
    fast = write_script(tmp_path / "fast.json", WORK_TURNS)
    with running_daemon(home, tmp_path):
        followed = run_loom(*GOAL, "--model", fast, "--json", cwd=work, home=home, timeout_s=90)
        started = run_loom(*GOAL, "--model", model, "--detach", cwd=work, home=home)
        assert started.returncode == 0, started
        goal_id = started.stdout.strip()
        running = run_loom("goals", cwd=work, home=home)  # the newest first
        cancelled = run_loom("goal", "cancel", goal_id, cwd=work, home=home)
        after = run_loom("goals", cwd=work, home=home)
        again = run_loom("goal", "cancel", goal_id, cwd=work, home=home)
    # Followed on the daemon, a goal's events are NDJSON and its report the last line.
    assert followed.returncode == 0, followed
    *events, last = (json.loads(line) for line in followed.stdout.splitlines())
    assert [e["type"] for e in events] == ["goal_session_started", "goal_verdict", "goal_finished"]
    assert last["type"] == "goal_report" and last["status"] == "completed" and last["spent"]["sessions"] == 1
    assert goal_id.startswith("goal_") and running.stdout.startswith(f"{goal_id}  running ")
    assert cancelled.returncode == 0 and f"goal {goal_id}: cancelled - cancelled by a client" in cancelled.stdout
    assert "  left: counted - not judged yet" in cancelled.stdout
    assert after.stdout.startswith(f"{goal_id}  cancelled  1 attempt   sessions 1/5")
    assert again.returncode == 2 and "already ended cancelled" in again.stderr


def test_without_the_daemon_detach_is_refused_since_the_goal_would_stop_with_the_command(tmp_path: Path) -> None:
    model = prepare(tmp_path, [])
    home, work = tmp_path / "home", tmp_path / "work"
    done = run_loom(*GOAL, "--model", model, "--detach", cwd=work, home=home)
    assert done.returncode == 2 and "--detach needs the daemon" in done.stderr


def test_ctrl_c_cancels_the_goal_and_exits_130(tmp_path: Path) -> None:
    model = prepare(tmp_path, [verdict(True, True)])
    write_script(tmp_path / "work.json", [{"delay_s": 60, "text": "never"}])
    home, work = tmp_path / "home", tmp_path / "work"
    proc = subprocess.Popen(
        [*loom_command(), *GOAL, "--model", model],
        cwd=work,
        env=clean_env(home),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        encoding="utf-8",
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # the first work session started: the goal is under way
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert first.startswith("session 1: s_"), err
    assert proc.returncode == 130, (out, err)
    assert "loom: cancelling the goal" in err and ": cancelled - cancelled by a client" in out


def kill_in_second_session(tmp_path: Path) -> None:
    """Run ``loom goal`` (no daemon) and SIGKILL it while its second work session thinks, before that one counts."""
    model = prepare(tmp_path, [verdict(True, False), verdict(True, True)])
    home, work = tmp_path / "home", tmp_path / "work"
    # The first session takes two seconds over its final answer, time to make the next one think for a minute.
    write_script(tmp_path / "work.json", [*WORK_TURNS[:2], {"delay_s": 2, **WORK_TURNS[2]}])
    proc = subprocess.Popen(
        [*loom_command(), *GOAL, "--model", model],
        cwd=work,
        env=clean_env(home),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        encoding="utf-8",
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("session 1: s_")
        deadline = time.monotonic() + 30
        while not (work / "n.txt").exists() and time.monotonic() < deadline:
            time.sleep(0.05)  # another process's file: nothing to wait on but the file system
        write_script(tmp_path / "work.json", [{"delay_s": 60, **WORK_TURNS[0]}, *WORK_TURNS[1:]])
        lines = [proc.stdout.readline() for _ in range(4)]  # the verdict, its two criteria, the second session
        time.sleep(1.0)  # the second session's run under way
    finally:
        proc.kill()  # SIGKILL: nothing is closed or recorded on the way out
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()
    assert lines[-1].startswith("session 2: s_"), lines
    assert (work / "n.txt").read_text().strip() == "1"
    write_script(tmp_path / "work.json", WORK_TURNS)


def test_a_loom_goal_killed_mid_goal_is_carried_on_by_the_daemon_with_auto_resume(tmp_path: Path) -> None:
    kill_in_second_session(tmp_path)
    home, work = tmp_path / "home", tmp_path / "work"
    (home / "config.json").write_text(json.dumps({"autoResume": True}), encoding="utf-8")
    daemon = start_daemon(home, tmp_path)
    try:
        done, runs = anyio.run(_finished_goal, daemon)
    finally:
        daemon.stop()
    assert done.status == "completed", done
    assert len(done.attempts) == 2 and runs == [1, 1]  # the first session not run again, the second's run resumed
    assert (work / "n.txt").read_text().strip() == "2"


def test_a_loom_goal_killed_mid_goal_is_carried_on_by_loom_goal_resume(tmp_path: Path) -> None:
    kill_in_second_session(tmp_path)
    home, work = tmp_path / "home", tmp_path / "work"
    [goal] = json.loads(run_loom("goals", "--json", cwd=work, home=home).stdout)["goals"]
    assert goal["status"] == "running" and len(goal["attempts"]) == 2
    resumed = run_loom("goal", "resume", goal["goal_id"], cwd=work, home=home, timeout_s=90)
    again = run_loom("goal", "resume", goal["goal_id"], cwd=work, home=home)
    assert resumed.returncode == 0, resumed
    lines = resumed.stdout.splitlines()
    assert lines[:2] == ["verdict 2: passed (2/2)", "  [pass] counted - criterion 1 holds"]  # only what is new
    assert "finished: completed - every criterion passed after 2 sessions" in lines
    assert (work / "n.txt").read_text().strip() == "2"  # session 1 not run again; session 2's count ran once
    assert again.returncode == 2 and "already ended completed" in again.stderr


async def _finished_goal(daemon: Daemon) -> tuple[GoalReport, list[int]]:
    """The daemon's only goal once it ended, and how many runs each of its work sessions had."""
    async with mcp_client(daemon, "auto") as client:
        face = LoomClient(client, on_daemon=True)
        [goal] = await face.list_goals()
        with anyio.fail_after(45):
            done = await face.get_goal(goal.goal_id, wait_s=40)
        runs = [
            sum(1 for e in (await face.read_events(a.session_id, limit=1000)).events if e.type == "run_started")
            for a in done.attempts
        ]
    return done, runs


def test_a_goal_another_loom_goal_is_running_is_not_cancelled_from_here_behind_its_back(tmp_path: Path) -> None:
    model = prepare(tmp_path, [verdict(True, True)], work=[{"delay_s": 60, "text": "never"}])
    home, work = tmp_path / "home", tmp_path / "work"
    proc = subprocess.Popen(
        [*loom_command(), *GOAL, "--model", model],
        cwd=work,
        env=clean_env(home),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        encoding="utf-8",
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        said = next(line for line in proc.stderr if line.startswith("loom: goal "))  # loom: goal ID in session S
        goal_id = said.split()[2]
        assert proc.stdout.readline().startswith("session 1: s_")
        time.sleep(1.0)  # its run under way
        refused = run_loom("goal", "cancel", goal_id, cwd=work, home=home)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert refused.returncode == 2, refused
    assert f"goal {goal_id!r} is being worked on by another Loom process (pid {proc.pid})" in refused.stderr
    assert proc.returncode == 130 and ": cancelled - cancelled by a client" in out
