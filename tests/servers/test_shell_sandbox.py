"""The shell server's bwrap sandbox, as a user of the ``run`` tool sees it.

Tests that need a working sandbox skip with the reason bwrap's own test run gave. The ones about a missing or
broken bwrap run everywhere: they change PATH, which is how a machine without bubblewrap looks to the server.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client

import servers.shell
from servers.shell import build_server
from servers.shell._sandbox import bwrap_problem
from tests.servers._support import REPO_ROOT, call_ok, call_ok_text

pytestmark = pytest.mark.anyio

BWRAP_PROBLEM = bwrap_problem(network=False)

needs_bwrap = pytest.mark.skipif(BWRAP_PROBLEM is not None, reason=f"no bwrap sandbox: {BWRAP_PROBLEM}")


@pytest.fixture
def outside() -> Iterator[Path]:
    """A writable directory outside the root and outside /tmp (which the sandbox replaces with a private one)."""
    try:
        directory = Path(tempfile.mkdtemp(prefix="loom-sandbox-test-", dir=Path.home()))
    except OSError as exc:
        pytest.skip(f"no writable directory under the home directory: {exc}")
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def no_bwrap_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """PATH holding only an empty directory, as on a machine without bubblewrap; returns that directory."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    return empty


@needs_bwrap
async def test_writes_outside_the_root_fail_and_inside_succeed(root: Path, outside: Path, tmp_path: Path) -> None:
    async with Client(build_server(root, sandbox="bwrap")) as client:
        content, text = await call_ok_text(
            client,
            "run",
            {
                # The remount is what a root shell would try first; it must not make the host writable.
                "command": f"mount -o remount,rw / 2>/dev/null; echo leak > {outside}/f; echo in > inside.txt; "
                f"echo scratch > {tmp_path}/private && cat {tmp_path}/private"
            },
        )
    assert (content["sandboxed"], content["exit_code"], content["stdout"]) == (True, 0, "scratch\n")
    assert "Read-only file system" in content["stderr"]
    assert not (outside / "f").exists()
    assert (root / "inside.txt").read_text() == "in\n"
    # /tmp inside is private: the scratch file never reached the host's /tmp.
    assert not (tmp_path / "private").exists()
    first, note = text.splitlines()[:2]
    assert first.endswith(", sandboxed")
    assert note == f"note: the sandbox is read-only outside {root} and /tmp; write inside the root"


@needs_bwrap
async def test_no_network_blocks_a_loopback_listener_that_is_reachable_with_network(root: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        # bash's own /dev/tcp: no interpreter that could live under /tmp, which the sandbox replaces.
        connect = f"( exec 3<>/dev/tcp/127.0.0.1/{port} )"
        for network, reached in ((True, True), (False, False)):
            async with Client(build_server(root, sandbox="bwrap", network=network)) as client:
                content, text = await call_ok_text(client, "run", {"command": f"{connect} && echo connected"})
            assert (content["stdout"] == "connected\n") is reached, (network, content)
            assert ("Connection refused" in content["stderr"]) is not reached, content["stderr"]
            assert text.splitlines()[0].endswith(", sandboxed" if network else ", sandboxed without network")


@needs_bwrap
def test_instructions_tell_the_model_where_it_can_write(root: Path) -> None:
    instructions = build_server(root, sandbox="auto", network=False).instructions or ""
    assert f"read-only except {root} and a private /tmp" in instructions
    assert "no network access" in instructions
    assert "sandbox" not in (build_server(root, sandbox="off").instructions or "").replace(str(root), "")


def test_requiring_bwrap_without_it_is_a_clear_error(root: Path, no_bwrap_on_path: Path) -> None:
    with pytest.raises(ValueError) as raised:
        build_server(root, sandbox="bwrap")
    assert str(raised.value) == (
        "sandbox 'bwrap' was requested but cannot be used: bwrap was not found on PATH; "
        "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap)"
    )
    with pytest.raises(ValueError, match=r"network=False \(--no-network\) needs the bwrap sandbox"):
        build_server(root, sandbox="auto", network=False)
    with pytest.raises(ValueError, match=r"needs the bwrap sandbox, but sandbox is 'off'"):
        build_server(root, sandbox="off", network=False)


async def test_auto_without_bwrap_runs_unsandboxed_and_says_nothing_about_a_sandbox(
    root: Path, no_bwrap_on_path: Path
) -> None:
    server = build_server(root, sandbox="auto")
    assert "sandbox" not in (server.instructions or "").replace(str(root), "")
    async with Client(server) as client:
        content, text = await call_ok_text(client, "run", {"command": "echo hi"})
    assert (content["stdout"], content["sandboxed"]) == ("hi\n", False)
    assert "sandboxed" not in text


async def test_a_bwrap_that_cannot_run_here_is_reported_by_its_own_error(root: Path, no_bwrap_on_path: Path) -> None:
    # What bwrap prints where the kernel or container forbids user namespaces.
    fake = no_bwrap_on_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    with pytest.raises(ValueError) as raised:
        build_server(root, sandbox="bwrap")
    assert str(raised.value) == (
        f"sandbox 'bwrap' was requested but cannot be used: {fake} failed a test run (exit 1): "
        f"bwrap: No permissions to create new namespace"
    )
    async with Client(build_server(root, sandbox="auto")) as client:
        assert (await call_ok(client, "run", {"command": "echo hi"}))["sandboxed"] is False


def test_loom_server_shell_refuses_to_start_without_the_sandbox_it_was_asked_for(root: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "servers.shell", "--root", str(root), "--sandbox", "bwrap"],
        cwd=REPO_ROOT,
        env={**os.environ, "PATH": str(tmp_path)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "loom server shell: sandbox 'bwrap' was requested but cannot be used: bwrap was not found on PATH; "
        "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap)\n"
    )


def test_no_network_without_bwrap_refuses_to_start(
    root: Path, no_bwrap_on_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert servers.shell.main(["--root", str(root), "--no-network"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "loom server shell: network=False (--no-network) needs the bwrap sandbox" in captured.err
    assert "apt-get install bubblewrap" in captured.err
