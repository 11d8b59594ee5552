"""``loom orchestrate`` end to end: the real CLI process, a face in it, scripted planner, executors and reviewer."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from tests.clients.cli_support import clean_env, loom_command, run_loom
from tests.orchestrator.daemon.daemon_process import running_daemon
from tests.orchestrator.face.orchestration_support import FAIL, executor_turns, install_roles, log_lines

ARGS = ("--mode", "bypass", "--max-parallel", "2", "--task-timeout", "30")


def dirs(tmp_path: Path) -> tuple[Path, Path]:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    return home, work


def test_orchestrate_prints_each_transition_and_the_report_and_exits_0_when_every_task_passed(
    tmp_path: Path,
) -> None:
    home, work = dirs(tmp_path)
    install_roles(home, tmp_path)
    done = run_loom("orchestrate", "ship it", *ARGS, cwd=work, home=home, timeout_s=90)
    assert done.returncode == 0, done
    lines = done.stdout.splitlines()

    def at(prefix: str) -> int:
        return next(i for i, line in enumerate(lines) if line.startswith(prefix))

    assert "planned: 3 tasks: a, b, c" in lines
    for task in "abc":
        assert any(line.startswith(f"task {task}: running (attempt 1) in s_") for line in lines), done
        assert any(line.startswith(f"task {task}: passed (attempt 1)") for line in lines), done
    assert at("task c: ready") > max(at(f"task {t}: passed (attempt 1)") for t in "ab")  # c waited for both
    assert "finished: passed - all 3 tasks passed" in lines
    assert any(
        line.startswith("orchestration orch_") and line.endswith(": passed - all 3 tasks passed") for line in lines
    )
    assert "- [passed] c: Sum up (after a, b), 1 attempt" in lines
    assert log_lines(work) == 3


def test_on_a_daemon_the_orchestration_runs_there_in_the_session_given(tmp_path: Path) -> None:
    home, work = dirs(tmp_path)
    install_roles(home, tmp_path)
    with running_daemon(home, tmp_path):
        made = run_loom("run", "hello", "--model", "scripted:demo", "--mode", "bypass", "--json", cwd=work, home=home)
        assert made.returncode == 0, made
        session_id = made.events()[0].session_id
        done = run_loom("orchestrate", "ship it", "--session", session_id, *ARGS, cwd=work, home=home, timeout_s=90)
        tree = run_loom("sessions", cwd=work, home=home)
    assert done.returncode == 0, done
    assert f"in session {session_id}" in done.stderr
    assert tree.stdout.count("[executor]") == 3 and tree.stdout.count("[reviewer]") == 3, tree  # under it
    assert log_lines(work) == 3


def test_orchestrate_exits_1_when_a_task_failed_and_json_ends_with_the_report(tmp_path: Path) -> None:
    home, work = dirs(tmp_path)
    install_roles(home, tmp_path, reviewer=FAIL)
    done = run_loom("orchestrate", "ship it", *ARGS, "--max-attempts", "1", "--json", cwd=work, home=home, timeout_s=90)
    assert done.returncode == 1, done
    *events, last = [json.loads(line) for line in done.stdout.splitlines()]
    assert last["type"] == "orchestration_report" and last["status"] == "failed"
    assert {t["id"]: t["state"] for t in last["tasks"]} == {"a": "failed", "b": "failed", "c": "blocked"}
    assert [t["findings"] for t in last["tasks"] if t["id"] == "a"] == [["log.txt:1: wrong line"]]
    assert {e["type"] for e in events} <= {
        "orchestration_started",
        "task_graph_planning",
        "task_graph_planned",
        "task_state_changed",
        "orchestration_finished",
    }
    assert events[-1]["type"] == "orchestration_finished" and events[-1]["status"] == "failed"


def test_orchestrate_refuses_an_unknown_session_and_a_bad_timeout(tmp_path: Path) -> None:
    home, work = dirs(tmp_path)
    unknown = run_loom("orchestrate", "x", "--session", "s_nope", cwd=work, home=home)
    assert unknown.returncode == 2 and "no session 's_nope'" in unknown.stderr, unknown
    bad = run_loom("orchestrate", "x", "--task-timeout", "0", cwd=work, home=home)
    assert bad.returncode == 2 and "--task-timeout must be more than 0" in bad.stderr, bad


def test_ctrl_c_cancels_the_orchestration_and_its_children(tmp_path: Path) -> None:
    home, work = dirs(tmp_path)
    install_roles(home, tmp_path, executor=executor_turns(delay_s=60))
    proc = subprocess.Popen(
        [*loom_command(), "orchestrate", "ship it", *ARGS],
        cwd=work,
        env=clean_env(home),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        encoding="utf-8",
    )
    try:
        assert proc.stdout is not None
        seen: list[str] = []
        for line in proc.stdout:  # blocks on the child's output; the executors wait 60 s, so this ends first
            seen.append(line.rstrip("\n"))
            if sum(s.startswith(("task a: running", "task b: running")) for s in seen) == 2:
                break
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)
    assert proc.returncode == 130, (seen, out, err)
    assert "finished: cancelled - cancelled from loom orchestrate (Ctrl-C)" in out.splitlines(), out
    assert "- [cancelled] a: Write a, 1 attempt" in out and "- [cancelled] c: Sum up (after a, b)" in out, out
    assert log_lines(work) == 0


@pytest.mark.parametrize("flag", ["--max-parallel", "--max-attempts"])
def test_counts_below_one_are_usage_errors(tmp_path: Path, flag: str) -> None:
    home, work = dirs(tmp_path)
    done = run_loom("orchestrate", "x", flag, "0", cwd=work, home=home)
    assert done.returncode == 2 and "must be at least 1" in done.stderr, done
