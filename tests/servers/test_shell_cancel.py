"""Killing a command on timeout and on cancel: the command and everything it started, sandboxed or not.

The command ignores SIGTERM (and so do its children, which inherit the ignored disposition), starts two children
and writes their pids and its own into a file in the root, which the sandbox shares with the host (its /tmp is
private), with the pid namespace they are numbered in: the sandbox has its own, so the test maps them to host pids
through the NSpid line of /proc/PID/status. While they run the test reads their process group from /proc;
afterwards no live process may remain in that group. Zombies count as dead: this container's PID 1 never reaps
orphans.

Cancellation is tested in-process (the call's anyio scope is cancelled) and over stdio against
``python -m servers.shell``, where the client SDK sends ``notifications/cancelled`` and the server must kill the
group while the connection stays open.
"""

from __future__ import annotations

import os
import signal
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from servers.shell import build_server
from servers.shell._sandbox import SandboxMode
from tests.servers._support import BWRAP_PROBLEM, IN_PROCESS_MODES, SANDBOXES, call_ok, connect, process_running

pytestmark = pytest.mark.anyio


STUBBORN = (
    "trap '' TERM; readlink /proc/$$/ns/pid > pidns; "
    "sleep 300 & echo $! >> pids; sleep 300 & echo $! >> pids; echo $$ >> pids; wait"
)
"""A shell and two children that all ignore SIGTERM, so only a SIGKILL to the whole group ends them."""

TERM_GRACE = "0.5"


@pytest.fixture(params=SANDBOXES)
def sandbox(request: pytest.FixtureRequest) -> SandboxMode:
    mode: SandboxMode = request.param
    return mode


def open_client(transport: str, root: Path, sandbox: SandboxMode) -> AbstractAsyncContextManager[Client]:
    server = build_server(root, default_timeout_s=10, term_grace_s=float(TERM_GRACE), sandbox=sandbox)
    args = ["--root", str(root), "--timeout", "10", "--term-grace", TERM_GRACE, "--sandbox", sandbox]
    return connect(transport, server, "servers.shell", args)


def group_of(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    # The command name in parentheses may contain spaces; after it come: state ppid pgrp ...
    return int(stat[stat.rfind(")") + 2 :].split()[2])


def live_members(pgid: int) -> list[int]:
    """Pids of the non-zombie processes in a process group, found by scanning /proc."""
    members = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if group_of(int(name)) == pgid and process_running(int(name)):
                    members.append(int(name))
            except (OSError, ValueError, IndexError):
                continue
    return members


def in_namespace(namespace: str) -> dict[int, int]:
    """The processes of a pid namespace (named as readlink /proc/PID/ns/pid names it): their pid there -> host pid."""
    found = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.readlink(f"/proc/{name}/ns/pid") != namespace:
                    continue
                status = Path(f"/proc/{name}/status").read_text()
            except OSError:
                continue
            (nspid,) = [line.split()[-1] for line in status.splitlines() if line.startswith("NSpid:")]
            found[int(nspid)] = int(name)
    return found


async def running_group(pidfile: Path) -> int:
    """Wait until the command has written its three pids, check they run in one group of their own, return it."""
    while True:
        text = await anyio.Path(pidfile).read_text() if await anyio.Path(pidfile).exists() else ""
        if text.count("\n") == 3:
            break
        await anyio.sleep(0.02)
    host = in_namespace((pidfile.parent / "pidns").read_text().strip())
    pids = [host[int(line)] for line in text.split()]
    assert all(process_running(pid) for pid in pids)
    (pgid,) = {group_of(pid) for pid in pids}
    assert pgid != os.getpgrp()
    assert set(pids) <= set(live_members(pgid))
    return pgid


async def wait_until_group_gone(pgid: int, timeout_s: float) -> None:
    with anyio.fail_after(timeout_s):
        while True:
            if not live_members(pgid):
                return
            await anyio.sleep(0.05)


@pytest.mark.parametrize("transport", ["auto", "stdio"])
async def test_a_timeout_kills_the_command_and_its_children_that_ignore_sigterm(
    transport: str, sandbox: SandboxMode, root: Path
) -> None:
    outcome: dict[str, Any] = {}
    async with open_client(transport, root, sandbox) as client:

        async def call() -> None:
            outcome.update(await call_ok(client, "run", {"command": STUBBORN, "timeout_s": 1}))

        with anyio.fail_after(10):
            async with anyio.create_task_group() as group:
                group.start_soon(call)
                pgid = await running_group(root / "pids")
        assert outcome["timed_out"] is True
        assert outcome["sandboxed"] is (sandbox == "bwrap")
        # Unsandboxed the shell outlives SIGTERM and dies of SIGKILL; bwrap, the group's leader, dies of SIGTERM
        # and --die-with-parent takes the shell with it.
        assert outcome["exit_code"] == -(signal.SIGKILL if sandbox == "off" else signal.SIGTERM)
        await wait_until_group_gone(pgid, timeout_s=2)


@pytest.mark.parametrize("transport", [*IN_PROCESS_MODES, "stdio"])
async def test_a_cancelled_call_leaves_no_process_of_its_group_behind(
    transport: str, sandbox: SandboxMode, root: Path
) -> None:
    async with open_client(transport, root, sandbox) as client:
        call_scope = anyio.CancelScope()

        async def call() -> None:
            with call_scope:
                await client.call_tool("run", {"command": STUBBORN, "timeout_s": 60})
            assert call_scope.cancelled_caught

        with anyio.fail_after(10):
            async with anyio.create_task_group() as group:
                group.start_soon(call)
                # Cancel once the children exist, so a slow machine cannot make the test pass vacuously.
                pgid = await running_group(root / "pids")
                call_scope.cancel()
            # Over stdio only notifications/cancelled can have done this: the connection is still open.
            await wait_until_group_gone(pgid, timeout_s=3)
        assert (await call_ok(client, "run", {"command": "echo alive"}))["stdout"] == "alive\n"


@pytest.mark.skipif(BWRAP_PROBLEM is not None, reason=f"no bwrap sandbox: {BWRAP_PROBLEM}")
async def test_in_the_sandbox_a_redirected_background_job_ends_with_the_command(root: Path) -> None:
    # Unsandboxed such a job keeps running (test_shell.py); in the sandbox's pid namespace nothing outlives init.
    command = "sleep 300 > /dev/null 2>&1 & echo $! > pid; readlink /proc/$$/ns/pid"
    async with open_client("auto", root, "bwrap") as client:
        with anyio.fail_after(10):
            content = await call_ok(client, "run", {"command": command})
        assert (content["exit_code"], content["background_killed"]) == (0, False)
        namespace, job = content["stdout"].strip(), int((root / "pid").read_text())
        with anyio.fail_after(3):
            while True:
                host_pid = in_namespace(namespace).get(job)
                if host_pid is None or not process_running(host_pid):
                    break
                await anyio.sleep(0.05)
        instructions = build_server(root, sandbox="bwrap").instructions or ""
    assert "background jobs included, is killed when it ends" in instructions
