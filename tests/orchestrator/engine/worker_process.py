"""``loom worker`` processes for tests of the DBOS engine: start one, wait until it joins, SIGKILL it."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import anyio

from tests.clients.cli_support import clean_env, loom_command

JOIN_TIMEOUT_S = 30.0


@dataclass
class WorkerProcess:
    """One ``loom worker`` process of the pool, its stderr in a file."""

    worker_id: str
    proc: subprocess.Popen[bytes]
    stderr: Path

    def text(self) -> str:
        """What it printed so far."""
        return self.stderr.read_text(errors="replace") if self.stderr.exists() else ""

    async def joined(self, timeout_s: float = JOIN_TIMEOUT_S) -> None:
        """Wait until it says it joined the pool (failing if it exits first)."""
        with anyio.fail_after(timeout_s):
            while "joined the pool" not in self.text():
                assert self.proc.poll() is None, f"worker {self.worker_id} exited:\n{self.text()}"
                await anyio.sleep(0.05)

    def sigkill(self) -> None:
        """SIGKILL the worker alone, as a crash would: its stdio servers see EOF and exit."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def kill_group(self) -> None:
        """The cleanup: the worker and whatever it started."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)


def spawn_worker(worker_id: str, home: Path, cwd: Path, env: Mapping[str, str] | None = None) -> WorkerProcess:
    """Start ``loom worker --id WORKER_ID`` on ``home`` (whose config must choose the dbos engine)."""
    stderr = home.parent / f"{worker_id}.stderr"
    with stderr.open("wb") as err:
        proc = subprocess.Popen(
            [*loom_command(), "worker", "--id", worker_id],
            cwd=cwd,
            env=clean_env(home, env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,  # its own group: the cleanup reaches the stdio servers it started
        )
    return WorkerProcess(worker_id, proc, stderr)
