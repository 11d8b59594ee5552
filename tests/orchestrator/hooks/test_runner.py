"""Running a hook process: stdin, environment, bounded output, and a timeout that kills its whole group."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
import pytest

from orchestrator.hooks.runner import MAX_OUTPUT, run_command
from tests.orchestrator.hooks.support import script

pytestmark = pytest.mark.anyio


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purposes (killed, waiting for its reaper).
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
            return stat.read().split(") ")[-1].split()[0] != "Z"
    except OSError:
        return False


async def test_the_hook_gets_its_json_on_stdin_the_project_in_its_env_and_runs_in_the_sessions_directory(
    tmp_path: Path,
) -> None:
    body = (
        "import json, os, sys\n"
        "data = json.load(sys.stdin)\n"
        "print(json.dumps({'got': data, 'cwd': os.getcwd(), 'loom': os.environ['LOOM_PROJECT_DIR'],"
        " 'claude': os.environ['CLAUDE_PROJECT_DIR']}))\n"
    )
    result = await run_command(
        script(tmp_path, "echo", body), b'{"a": 1}', cwd=str(tmp_path), project=str(tmp_path), timeout_s=20
    )
    assert result.exit_code == 0
    seen = json.loads(result.stdout)
    assert seen == {"got": {"a": 1}, "cwd": str(tmp_path), "loom": str(tmp_path), "claude": str(tmp_path)}


async def test_a_timed_out_hook_is_killed_with_the_grandchild_it_started(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    body = (
        "import subprocess, sys, time\n"
        f"child = subprocess.Popen([{sys.executable!r}, '-c', 'import time; time.sleep(120)'])\n"
        f"open({str(pids)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(120)\n"
    )
    with anyio.fail_after(20):
        result = await run_command(script(tmp_path, "slow", body), b"{}", cwd=str(tmp_path), project="", timeout_s=2)
    assert result.exit_code is None and "timed out after 2 s" in result.problem
    grandchild = int(pids.read_text())
    with anyio.fail_after(5):
        while True:
            if not alive(grandchild):
                break
            await anyio.sleep(0.05)


async def test_output_is_bounded_and_a_hook_that_floods_stdout_never_blocks(tmp_path: Path) -> None:
    body = "import sys\nsys.stdout.write('x' * (4 * 1024 * 1024))\nsys.stderr.write('e' * (1024 * 1024))\n"
    with anyio.fail_after(20):
        result = await run_command(script(tmp_path, "flood", body), b"", cwd=str(tmp_path), project="", timeout_s=20)
    assert result.exit_code == 0
    assert len(result.stdout) == MAX_OUTPUT and len(result.stderr) == MAX_OUTPUT


async def test_a_hook_that_ignores_a_large_stdin_and_exits_is_fine(tmp_path: Path) -> None:
    with anyio.fail_after(20):
        result = await run_command("exit 0", b"x" * (2 * 1024 * 1024), cwd=str(tmp_path), project="", timeout_s=20)
    assert result.exit_code == 0


async def test_cancelling_while_a_hook_runs_kills_its_group(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    body = f"import os, time\nopen({str(pids)!r}, 'w').write(str(os.getpid()))\ntime.sleep(120)\n"
    command = script(tmp_path, "hang", body)
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: run_command(command, b"{}", cwd=str(tmp_path), project="", timeout_s=60))
            while True:
                if pids.exists() and pids.read_text():
                    break
                await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
        hook = int(pids.read_text())
        while True:
            if not alive(hook):
                break
            await anyio.sleep(0.05)
