"""The discovery file and the single-instance lock."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.daemon.discovery import (
    AlreadyRunning,
    InstanceLock,
    read_discovery,
    remove_discovery,
    write_discovery,
)


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_written_discovery_is_private_and_reads_back(tmp_path: Path) -> None:
    written = write_discovery(tmp_path, "http://127.0.0.1:4321/mcp")
    assert stat.S_IMODE((tmp_path / "daemon.json").stat().st_mode) == 0o600
    assert json.loads((tmp_path / "daemon.json").read_text()) == {
        "url": "http://127.0.0.1:4321/mcp",
        "pid": os.getpid(),
        "started": written.started,
    }
    found = read_discovery(tmp_path)
    assert found == written
    assert found.token_path == tmp_path / "daemon.token"
    assert found.health_url == "http://127.0.0.1:4321/health"
    assert [p.name for p in tmp_path.iterdir()] == ["daemon.json"]  # no temporary file left


@pytest.mark.parametrize("content", [None, "", "{", "[]", '{"url": 1, "pid": 2, "started": 3}', '{"url": "x"}'])
def test_missing_or_garbled_discovery_means_no_daemon(tmp_path: Path, content: str | None) -> None:
    if content is not None:
        (tmp_path / "daemon.json").write_text(content)
    assert read_discovery(tmp_path) is None


def test_a_dead_daemon_is_not_discovered(tmp_path: Path) -> None:
    body = {"url": "http://127.0.0.1:1/mcp", "pid": dead_pid(), "started": 1.0}
    (tmp_path / "daemon.json").write_text(json.dumps(body))
    assert read_discovery(tmp_path) is None


def test_only_our_own_discovery_file_is_removed(tmp_path: Path) -> None:
    (tmp_path / "daemon.json").write_text(json.dumps({"url": "u", "pid": os.getpid() + 1, "started": 1.0}))
    remove_discovery(tmp_path)
    assert (tmp_path / "daemon.json").exists()
    write_discovery(tmp_path, "http://127.0.0.1:1/mcp")
    remove_discovery(tmp_path)
    assert not (tmp_path / "daemon.json").exists()


def test_the_lock_admits_one_daemon_and_names_it_to_the_next(tmp_path: Path) -> None:
    with InstanceLock(tmp_path):
        with pytest.raises(AlreadyRunning, match=rf"already running \(pid {os.getpid()}, still starting\)"):
            InstanceLock(tmp_path).__enter__()
        write_discovery(tmp_path, "http://127.0.0.1:4321/mcp")
        with pytest.raises(AlreadyRunning) as raised:
            InstanceLock(tmp_path).__enter__()
        assert str(raised.value) == f"a Loom daemon is already running (pid {os.getpid()}, http://127.0.0.1:4321/mcp)"
    with InstanceLock(tmp_path):  # released on exit, so a stale discovery file blocks nobody
        pass
    assert stat.S_IMODE((tmp_path / "daemon.lock").stat().st_mode) == 0o600


def test_a_lock_held_by_another_process_is_respected(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from pathlib import Path\n"
            "from orchestrator.daemon.discovery import InstanceLock\n"
            "with InstanceLock(Path(sys.argv[1])):\n"
            "    print('locked', flush=True)\n"
            "    time.sleep(30)\n",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        with pytest.raises(AlreadyRunning, match=f"pid {holder.pid}"):
            InstanceLock(tmp_path).__enter__()
    finally:
        holder.kill()
        holder.wait(timeout=5)
        if holder.stdout is not None:
            holder.stdout.close()
    with InstanceLock(tmp_path):  # the kernel dropped the lock with the killed process
        pass
