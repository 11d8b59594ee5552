"""host_hiding works out the host's part once per process, yet still sees sockets and files that come and go."""

from __future__ import annotations

import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from servers.shell._hiding import _host_paths, host_hiding


@pytest.fixture
def outside() -> Iterator[Path]:
    """A directory outside /tmp (which is hidden whole, so nothing under it is listed on its own)."""
    try:
        directory = Path(tempfile.mkdtemp(prefix="loom-hiding-test-", dir=Path.home()))
    except OSError as exc:
        pytest.skip(f"no writable directory under the home directory: {exc}")
    yield directory.resolve()
    shutil.rmtree(directory, ignore_errors=True)


def _bind(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    return sock


def test_a_socket_started_after_the_first_session_is_hidden_in_the_next(tmp_path: Path, outside: Path) -> None:
    root = tmp_path / "work"
    root.mkdir()
    agent_dir = outside / "agent"
    agent_dir.mkdir()
    environ = {"HOME": str(Path.home()), "PATH": "/usr/bin", "SSH_AUTH_SOCK": str(agent_dir / "sock")}
    before = host_hiding(environ, root)
    assert agent_dir not in before.directories  # nothing there yet: nothing to cover
    sock = _bind(agent_dir / "sock")
    try:
        after = host_hiding(environ, root)
    finally:
        sock.close()
    assert agent_dir in after.directories
    assert _host_paths.cache_info().hits >= 1  # the second call reused the first one's resolution


def test_other_environment_values_are_not_answered_from_the_cache(tmp_path: Path, outside: Path) -> None:
    root = tmp_path / "work"
    root.mkdir()
    first, second = outside / "one", outside / "two"
    first.mkdir()
    second.mkdir()
    socks = [_bind(first / "s"), _bind(second / "s")]
    try:
        home = str(Path.home())
        one = host_hiding({"HOME": home, "DOCKER_HOST": f"unix://{first / 's'}"}, root)
        two = host_hiding({"HOME": home, "DOCKER_HOST": f"unix://{second / 's'}"}, root)
    finally:
        for sock in socks:
            sock.close()
    assert first in one.directories and second not in one.directories
    assert second in two.directories and first not in two.directories


def test_a_needed_file_bound_back_only_while_it_exists(tmp_path: Path, outside: Path) -> None:
    root = tmp_path / "work"
    root.mkdir()
    runtime = outside / "runtime"
    tools = runtime / "bin"
    tools.mkdir(parents=True)
    environ = {"HOME": str(Path.home()), "XDG_RUNTIME_DIR": str(runtime), "PATH": str(tools)}
    assert tools in host_hiding(environ, root).restored
    tools.rmdir()  # bwrap cannot bind a source that is gone, so it must not be asked to
    assert tools not in host_hiding(environ, root).restored
