"""Stopping a run from outside: Ctrl-C, and the reader of ``loom``'s output going away.

Either way ``loom`` exits 130 without a traceback, the run is stored as ``cancelled`` and nothing it
started keeps running.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio

from orchestrator.events import EVENT_ADAPTER, RunFinished, RunStarted, ToolCallFinished, ToolCallStarted
from orchestrator.store.checkpoints import CheckpointStore
from orchestrator.store.interface import RunRecord
from tests.clients.cli_support import (
    clean_env,
    loom_command,
    make_project,
    parse_events,
    processes_matching,
    write_config,
    write_script,
)

STARTUP_TIMEOUT_S = 20.0
EXIT_TIMEOUT_S = 10.0
EXPECTED_EXIT_S = 5.0
"""How fast a user's Ctrl-C must take effect, with slack for a loaded test machine."""


def _wait_for(what: str, predicate: Callable[[], object], deadline: float, proc: subprocess.Popen[bytes]) -> None:
    while not predicate():
        assert proc.poll() is None, f"loom exited ({proc.returncode}) before {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _live(pids: dict[int, str]) -> dict[int, str]:
    """Drop zombies: they hold nothing, and PID 1 here may never reap them."""
    return {pid: state for pid, state in pids.items() if state not in ("Z", "X")}


def _marker() -> str:
    """A unique number of seconds to sleep, which finds this test's processes in /proc."""
    return f"31.{uuid.uuid4().int % 10**8:08d}"


@contextmanager
def _reaping(marker: str) -> Iterator[None]:
    """Kill whatever carries ``marker`` when the block ends, so that no test leaks a process, even failing."""
    try:
        yield
    finally:
        for pid in _live(processes_matching(marker)):
            os.kill(pid, signal.SIGKILL)


def _stored_run(home: Path, run_id: str) -> RunRecord | None:
    async def get() -> RunRecord | None:
        async with CheckpointStore(home / "loom.db") as store:
            return await store.get_run(run_id)

    return anyio.run(get)


def _file_has_event(path: Path, event_type: str) -> Callable[[], bool]:
    needle = f'"type":"{event_type}"'
    return lambda: any(needle in line for line in path.read_text(encoding="utf-8").splitlines(keepends=True))


def test_ctrl_c_cancels_the_run_and_kills_the_running_command(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    home = tmp_path / "home"
    marker = f"sleep {_marker()}"
    write_script(
        project / "slow.json",
        [
            {"text": "Running a slow command.", "tool_calls": [
                {"name": "shell__run", "arguments": {"command": f"{marker}; echo done", "timeout_s": 60}},
            ]},
            {"text": "It finished (it should not have)."},
        ],
    )  # fmt: skip
    out_path, err_path = tmp_path / "stdout.jsonl", tmp_path / "stderr.txt"

    with _reaping(marker), out_path.open("wb") as out, err_path.open("wb") as err:
        proc = subprocess.Popen(
            [*loom_command(), "run", "--json", "--mode", "bypass", "--model", "scripted:slow.json", "run it"],
            cwd=project,
            env=clean_env(home),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
        )
        try:
            deadline = time.monotonic() + STARTUP_TIMEOUT_S
            _wait_for("the tool_call_started event", _file_has_event(out_path, "tool_call_started"), deadline, proc)
            _wait_for(f"the command {marker!r} to start", lambda: _live(processes_matching(marker)), deadline, proc)
            sent = time.monotonic()
            proc.send_signal(signal.SIGINT)
            returncode = proc.wait(timeout=EXIT_TIMEOUT_S)
            elapsed = time.monotonic() - sent
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=EXIT_TIMEOUT_S)
        # Checked before the reaper runs: the command must already be gone when loom has exited.
        survivors = _live(processes_matching(marker))

    stdout = out_path.read_text(encoding="utf-8")
    stderr = err_path.read_text(encoding="utf-8")
    assert returncode == 130, f"exit {returncode}\n{stdout}\n{stderr}"
    assert elapsed < EXPECTED_EXIT_S, f"took {elapsed:.1f}s to exit after SIGINT"
    assert "Traceback" not in stderr, stderr
    assert survivors == {}, f"still running after loom exited: {survivors}"
    events = parse_events(stdout)
    last = events[-1]
    assert isinstance(last, RunFinished), last
    assert last.status == "cancelled"
    assert last.seq is not None  # stored, not just printed
    assert any(isinstance(e, ToolCallStarted) and marker in str(e.arguments) for e in events)
    assert not any(isinstance(e, ToolCallFinished) and not e.is_error for e in events)


def test_ctrl_c_while_a_server_is_starting(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    home = tmp_path / "home"
    seconds = _marker()
    # A configured server that never finishes starting (it only sleeps), so Ctrl-C lands in start-up.
    hang = {"command": sys.executable, "args": ["-c", f"import time; time.sleep({seconds})"], "startupTimeout": 60}
    write_config(project / "servers.json", {"slow": hang})
    out_path, err_path = tmp_path / "stdout.jsonl", tmp_path / "stderr.txt"

    with _reaping(seconds), out_path.open("wb") as out, err_path.open("wb") as err:
        proc = subprocess.Popen(
            [*loom_command(), "run", "--json", "--mode", "bypass", "--config", "servers.json", "explore"],
            cwd=project,
            env=clean_env(home),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
        )
        try:
            deadline = time.monotonic() + STARTUP_TIMEOUT_S
            _wait_for("the server to be started", lambda: _live(processes_matching(seconds)), deadline, proc)
            proc.send_signal(signal.SIGINT)
            returncode = proc.wait(timeout=EXIT_TIMEOUT_S)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=EXIT_TIMEOUT_S)
        survivors = _live(processes_matching(seconds))

    stderr = err_path.read_text(encoding="utf-8")
    assert returncode == 130, f"exit {returncode}\n{stderr}"
    assert "Traceback" not in stderr, stderr
    assert survivors == {}, f"server still running after loom exited: {survivors}"


def _run_until_reader_leaves(tmp_path: Path, turns: list[dict[str, object]]) -> tuple[int, str, str, Path]:
    """Run a script with ``--json`` into a pipe, read up to the first tool call, close the pipe, wait.

    Returns the exit code, the run id, stderr and ``LOOM_HOME``.
    """
    project = make_project(tmp_path / "project")
    home = tmp_path / "home"
    write_script(project / "script.json", turns)
    err_path = tmp_path / "stderr.txt"
    with err_path.open("wb") as err:
        proc = subprocess.Popen(
            [*loom_command(), "run", "--json", "--mode", "bypass", "--model", "scripted:script.json", "go"],
            cwd=project,
            env=clean_env(home),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
        )
    # Reading blocks; a watchdog kill bounds it (the read then sees end of file).
    watchdog = threading.Timer(STARTUP_TIMEOUT_S, proc.kill)
    watchdog.start()
    run_id = ""
    try:
        assert proc.stdout is not None
        with proc.stdout:
            for line in proc.stdout:
                event = EVENT_ADAPTER.validate_json(line)
                if isinstance(event, RunStarted):
                    run_id = event.run_id
                if isinstance(event, ToolCallStarted):
                    break
            else:
                raise AssertionError("loom ended its output before the tool call started")
        # The pipe is closed now: like `loom run --json ... | head`.
        returncode = proc.wait(timeout=EXIT_TIMEOUT_S)
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=EXIT_TIMEOUT_S)
    return returncode, run_id, err_path.read_text(encoding="utf-8"), home


# The tool call takes a second, so the pipe is closed before loom next writes (the call's result).
_SLOW_TOOL: dict[str, object] = {
    "text": "One moment.",
    "tool_calls": [{"name": "shell__run", "arguments": {"command": "sleep 1"}}],
}


def test_closed_stdout_cancels_the_run_cleanly(tmp_path: Path) -> None:
    # The next model call thinks for a while, so the cancel lands there.
    returncode, run_id, stderr, home = _run_until_reader_leaves(tmp_path, [_SLOW_TOOL, {"delay_s": 20, "text": "x"}])

    assert returncode == 130, stderr
    assert "stdout was closed" in stderr, stderr
    assert "Traceback" not in stderr, stderr
    run = _stored_run(home, run_id)
    assert run is not None and run.status == "cancelled", run


def test_closed_stdout_while_an_event_is_being_stored(tmp_path: Path) -> None:
    # The next model call answers at once, so the cancel lands while its message is being stored, or (the
    # run going on behind the face while the renderer writes) just after the run completed.
    returncode, run_id, stderr, home = _run_until_reader_leaves(tmp_path, [_SLOW_TOOL, {"text": "done"}])

    assert "Traceback" not in stderr and "Event loop is closed" not in stderr, stderr
    assert "stdout was closed" in stderr, stderr
    run = _stored_run(home, run_id)
    assert run is not None, stderr
    # What the exit code says is what the store holds: cancelled (130), or completed before the cancel (0).
    assert (returncode, run.status) in {(130, "cancelled"), (0, "completed")}, (returncode, run, stderr)
