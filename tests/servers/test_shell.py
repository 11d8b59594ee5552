"""The shell server driven through a real MCP client, in-process in both protocol eras and over stdio.

These run unsandboxed (``sandbox="off"``) so they behave the same with or without bwrap; the sandbox has its own
tests in test_shell_sandbox.py, and killing on timeout and cancel, in both modes, is in test_shell_cancel.py. The
background-job tests spawn a grandchild, write its pid to a file, and check whether the pid outlives the call.
"""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer

import servers.shell
from servers.shell import build_server
from tests.servers._support import (
    IN_PROCESS_MODES,
    call_error,
    call_ok,
    connect,
    process_running,
    text_of,
    wait_for_pid,
    wait_until_gone,
)

pytestmark = pytest.mark.anyio

TERM_GRACE_S = 0.5
"""Short SIGTERM-to-SIGKILL grace, so kills in these tests are quick."""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    return root


def make_server(root: Path, max_output_bytes: int = 64_000) -> MCPServer:
    return build_server(
        root, default_timeout_s=10, max_output_bytes=max_output_bytes, term_grace_s=TERM_GRACE_S, sandbox="off"
    )


def open_client(transport: str, root: Path) -> AbstractAsyncContextManager[Client]:
    args = ["--root", str(root), "--timeout", "10", "--sandbox", "off"]
    return connect(transport, make_server(root), "servers.shell", args)


@pytest.fixture(params=IN_PROCESS_MODES)
async def client(request: pytest.FixtureRequest, root: Path) -> AsyncIterator[Client]:
    async with open_client(request.param, root) as client:
        yield client


async def test_list_tools_reports_honest_annotations(client: Client) -> None:
    (tool,) = (await client.list_tools()).tools
    assert tool.name == "run"
    assert tool.annotations is not None
    hints = tool.annotations
    assert (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint, hints.open_world_hint) == (
        False,
        True,
        False,
        True,
    )
    assert tool.output_schema is not None and "timed_out" in tool.output_schema["properties"]
    assert tool.input_schema["properties"]["timeout_s"]["anyOf"][0]["maximum"] == 3600


async def test_reports_exit_code_stdout_and_stderr(client: Client) -> None:
    result = await client.call_tool("run", {"command": "echo out; echo err >&2; exit 7"})
    assert not result.is_error
    assert result.structured_content is not None
    content = result.structured_content
    assert (content["exit_code"], content["stdout"], content["stderr"], content["timed_out"]) == (
        7,
        "out\n",
        "err\n",
        False,
    )
    assert (
        content["stdout_truncated"],
        content["stderr_truncated"],
        content["background_killed"],
        content["sandboxed"],
    ) == (False, False, False, False)
    assert text_of(result).startswith("exit code 7, ")
    assert "--- stdout ---\nout\n--- stderr ---\nerr" in text_of(result)


async def test_stdin_is_empty_and_cwd_is_the_root_or_below(client: Client, root: Path) -> None:
    assert (await call_ok(client, "run", {"command": "cat; pwd"}))["stdout"] == f"{root}\n"
    assert (await call_ok(client, "run", {"command": "pwd", "cwd": "sub"}))["stdout"] == f"{root / 'sub'}\n"
    assert (await call_ok(client, "run", {"command": "pwd", "cwd": str(root / "sub")}))["exit_code"] == 0


async def test_a_cwd_outside_the_root_is_refused_and_nothing_runs(client: Client, root: Path, tmp_path: Path) -> None:
    os.symlink(tmp_path, root / "up")
    marker = tmp_path / "ran"
    for cwd in ("..", "/", str(tmp_path), "up", "sub/../.."):
        message = await call_error(client, "run", {"command": f"touch {marker}", "cwd": cwd})
        assert f"resolves outside the allowed root ({root}); nothing was run" in message, cwd
    assert "not an existing directory" in await call_error(client, "run", {"command": "true", "cwd": "missing"})
    assert "NUL" in await call_error(client, "run", {"command": "echo \x00"})
    assert "command is empty" in await call_error(client, "run", {"command": "  "})
    assert not await anyio.Path(marker).exists()


async def test_timeout_bounds_are_enforced(client: Client) -> None:
    for timeout in (0, -1, 3601):
        assert "validation error" in await call_error(client, "run", {"command": "true", "timeout_s": timeout})


async def test_long_output_keeps_head_and_tail_of_each_stream(root: Path) -> None:
    async with Client(make_server(root, max_output_bytes=1000)) as client:
        content = await call_ok(client, "run", {"command": "seq 1 100000; seq 1 100000 >&2"})
        for stream in ("stdout", "stderr"):
            text = content[stream]
            assert content[f"{stream}_truncated"] is True
            assert text.startswith("1\n2\n3\n") and text.endswith("99999\n100000\n")
            assert "bytes dropped ...]" in text
            assert len(text.encode()) < 1100


async def test_a_timeout_returns_partial_output_and_says_so(client: Client) -> None:
    with anyio.fail_after(10):
        result = await client.call_tool("run", {"command": "echo started; sleep 30", "timeout_s": 0.5})
    assert not result.is_error
    content = result.structured_content
    assert content is not None
    assert (content["timed_out"], content["stdout"], content["exit_code"]) == (True, "started\n", -signal.SIGTERM)
    assert 500 <= content["duration_ms"] < 5000
    assert text_of(result).startswith("TIMED OUT after 0.5s")
    assert "killed by SIGTERM" in text_of(result)


async def test_a_background_job_holding_the_pipes_does_not_hang_the_call(client: Client, tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    with anyio.fail_after(10):
        content = await call_ok(client, "run", {"command": f"sleep 30 & echo $! > {pidfile}; echo done"})
    assert (content["exit_code"], content["stdout"], content["background_killed"]) == (0, "done\n", True)
    await wait_until_gone(await wait_for_pid(pidfile), timeout_s=5)


async def test_a_background_job_with_redirected_output_keeps_running(client: Client, tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    content = await call_ok(client, "run", {"command": f"sleep 30 > /dev/null 2>&1 & echo $! > {pidfile}"})
    pid = await wait_for_pid(pidfile)
    try:
        assert (content["exit_code"], content["background_killed"]) == (0, False)
        assert process_running(pid)
    finally:
        os.kill(pid, signal.SIGKILL)


def test_build_server_validates_its_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not an existing directory"):
        build_server(tmp_path / "missing")
    with pytest.raises(ValueError, match="default_timeout_s"):
        build_server(tmp_path, default_timeout_s=0)
    with pytest.raises(ValueError, match="max_output_bytes"):
        build_server(tmp_path, max_output_bytes=0)


def test_main_rejects_a_missing_root(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert servers.shell.main(["--root", str(tmp_path / "missing")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "not an existing directory" in captured.err
