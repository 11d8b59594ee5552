"""What a sandboxed command cannot reach on the host: other processes, host UNIX sockets, new user namespaces.

Every test needs a working bwrap and skips with the reason its test run gave. The socket tests connect with the
system python (/usr/bin/python3), because an interpreter in a virtualenv under /tmp is hidden by the sandbox's
private /tmp.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp import Client

from servers.shell import build_server
from servers.shell._sandbox import bwrap_problem, probe_userns
from tests.servers._support import call_ok

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(bwrap_problem(network=False) is not None, reason=f"no bwrap sandbox: {bwrap_problem(False)}"),
]

SYSTEM_PYTHON = "/usr/bin/python3"

needs_system_python = pytest.mark.skipif(
    not os.access(SYSTEM_PYTHON, os.X_OK), reason=f"{SYSTEM_PYTHON} is needed to connect to a UNIX socket"
)

CONNECT = (
    f"{SYSTEM_PYTHON} -c 'import socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); "
    f'print("connected")\''
)
"""Connects to the UNIX socket named by its argument and prints 'connected', or fails with the reason."""


def private_dir(parent: Path) -> Iterator[Path]:
    try:
        directory = Path(tempfile.mkdtemp(prefix="loom-isolation-test-", dir=parent))
    except OSError as exc:
        pytest.skip(f"no writable directory under {parent}: {exc}")
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def outside() -> Iterator[Path]:
    """A writable directory outside the root, /tmp and /run, all of which the sandbox replaces."""
    yield from private_dir(Path.home())


@pytest.fixture
def under_run() -> Iterator[Path]:
    """A directory under /run, where host daemons keep their sockets."""
    yield from private_dir(Path("/run"))


def listening(path: Path) -> socket.socket:
    """A UNIX socket listening at path; connecting succeeds without an accept thanks to the backlog."""
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen()
    return listener


async def test_only_the_sandboxes_own_processes_are_visible_and_no_host_root_is_reachable(
    root: Path, outside: Path
) -> None:
    # /proc/PID/root of a host process that the command may trace (bwrap's own parent was one) is the host's root,
    # writable: try every pid the command can see.
    command = (
        "ls /proc | grep -E '^[0-9]+$' | sort -n | tr '\\n' ' '; "
        f"for p in /proc/[0-9]*; do echo leak 2>/dev/null > $p/root{outside}/escape.${{p#/proc/}}; done; true"
    )
    async with Client(build_server(root, sandbox="bwrap")) as client:
        content = await call_ok(client, "run", {"command": command})
    pids = [int(pid) for pid in content["stdout"].split()]
    # The namespace's init (bwrap), the shell, and the few commands of the pipeline: nothing of the host's.
    assert pids[0] == 1 and len(pids) <= 8 and max(pids) < 20, pids
    assert os.getpid() not in pids or os.getpid() < 20
    assert [path async for path in anyio.Path(outside).iterdir()] == []


@needs_system_python
@pytest.mark.parametrize("network", [False, True])
async def test_a_host_socket_under_run_is_unreachable_and_a_root_there_still_writable(
    under_run: Path, network: bool
) -> None:
    root = under_run / "root"
    root.mkdir()
    with listening(under_run / "daemon.sock"):
        async with Client(build_server(root, sandbox="bwrap", network=network)) as client:
            content = await call_ok(
                client, "run", {"command": f"echo in > inside.txt; {CONNECT} {under_run / 'daemon.sock'}"}
            )
    assert content["stdout"] == ""
    assert "No such file or directory" in content["stderr"]
    assert (root / "inside.txt").read_text() == "in\n"


@needs_system_python
async def test_the_sockets_named_by_the_environment_are_hidden_unless_configured_to_pass(
    root: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent, docker, home_level = outside / "agent", outside / "docker", Path.home() / f"{outside.name}.sock"
    agent.mkdir()
    docker.mkdir()
    monkeypatch.setenv("SSH_AUTH_SOCK", str(agent / "agent.sock"))
    monkeypatch.setenv("DOCKER_HOST", f"unix://{docker / 'docker.sock'}")
    # A socket right in the home directory: hiding its directory would hide the home, so only it is covered.
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", f"unix:path={home_level},guid=0")
    sockets = [agent / "agent.sock", docker / "docker.sock", home_level]
    listeners = [listening(path) for path in sockets]
    try:
        command = "; ".join(f"{CONNECT} {path}" for path in sockets)
        server = build_server(root, sandbox="bwrap", network=False)
        async with Client(server) as client:
            hidden = await call_ok(client, "run", {"command": command})
        async with Client(build_server(root, sandbox="bwrap", network=False, env_pass=["SSH_AUTH_SOCK"])) as client:
            passed = await call_ok(client, "run", {"command": command})
    finally:
        for listener in listeners:
            listener.close()
        home_level.unlink(missing_ok=True)
    assert hidden["stdout"] == "", hidden
    assert hidden["stderr"].count("Traceback") == 3, hidden["stderr"]
    assert f"hidden (/run, {agent}, {docker}, {home_level} are empty)" in (server.instructions or "")
    # Configured to pass, the agent is reachable; the others stay hidden.
    assert passed["stdout"] == "connected\n", passed
    assert passed["stderr"].count("Traceback") == 2, passed["stderr"]


async def test_commands_run_in_their_own_user_namespace_without_nested_ones(root: Path) -> None:
    bwrap = shutil.which("bwrap")
    assert bwrap is not None
    flags, problem = probe_userns(bwrap, True)
    if problem is not None:
        pytest.skip(f"this kernel gives the sandbox no user namespace: {problem}")
    host_namespace = os.readlink("/proc/self/ns/user")
    async with Client(build_server(root, sandbox="bwrap")) as client:
        content = await call_ok(
            client, "run", {"command": "readlink /proc/self/ns/user; id -u; unshare -U true && echo nested"}
        )
    namespace, uid, *rest = content["stdout"].splitlines()
    assert namespace != host_namespace
    assert int(uid) == os.getuid()
    assert rest == ([] if "--disable-userns" in flags else ["nested"])


async def test_a_kernel_that_refuses_user_namespaces_keeps_the_rest_of_the_sandbox(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = shutil.which("bwrap")
    assert real is not None
    # The real bwrap, except that --unshare-user fails the way it does where user namespaces are forbidden.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "bwrap"
    fake.write_text(
        '#!/bin/sh\nfor a; do if [ "$a" = --unshare-user ]; then\n'
        "  echo 'bwrap: No permissions to create new namespace' >&2; exit 1\nfi; done\n"
        f'exec {real} "$@"\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    server = build_server(root, sandbox="bwrap")
    assert (
        f"(No user namespace here: {fake} failed a test run (exit 1): bwrap: No permissions to create new "
        f"namespace.)" in (server.instructions or "")
    )
    async with Client(server) as client:
        content = await call_ok(client, "run", {"command": "ls /proc | grep -cE '^[0-9]+$'; echo ok > f"})
    assert content["sandboxed"] is True and content["exit_code"] == 0, content
    assert int(content["stdout"]) < 8
    assert (root / "f").read_text() == "ok\n"
