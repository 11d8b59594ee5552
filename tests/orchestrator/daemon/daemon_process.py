"""A real ``loom serve`` subprocess for end-to-end tests, found through its discovery file."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.clients.cli_support import clean_env, loom_command

START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 15.0


@dataclass
class Daemon:
    """A started daemon: its process, where it listens and the token it expects."""

    proc: subprocess.Popen[bytes]
    home: Path
    url: str
    token: str
    stderr_path: Path
    _stderr: IO[bytes]

    @property
    def origin(self) -> str:
        return self.url.removesuffix("/mcp")

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Send ``sig`` and wait (bounded) for the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
            raise AssertionError(f"the daemon did not stop within {STOP_TIMEOUT_S} s:\n{self.stderr()}") from None
        finally:
            self._stderr.close()


def start_daemon(home: Path, cwd: Path, *, log_name: str = "daemon", env: Mapping[str, str] | None = None) -> Daemon:
    """Start ``loom serve --port 0`` with ``LOOM_HOME=home`` (and ``env``); return once its discovery file names it."""
    stderr_path = cwd / f"{log_name}.stderr"
    err = stderr_path.open("wb")
    proc = subprocess.Popen(
        [*loom_command(), "serve", "--port", "0"],
        cwd=cwd,
        env=clean_env(home, env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=err,
    )
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        found = _discovery(home)
        if found is not None and found.get("pid") == proc.pid:
            return Daemon(proc, home, found["url"], (home / "daemon.token").read_text().strip(), stderr_path, err)
        if proc.poll() is not None or time.monotonic() > deadline:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=5)
            err.close()
            text = stderr_path.read_text(errors="replace")
            raise AssertionError(f"loom serve did not come up (exit {proc.returncode}):\n{text}")
        time.sleep(0.05)


def _discovery(home: Path) -> dict[str, Any] | None:
    try:
        data: dict[str, Any] = json.loads((home / "daemon.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data


@contextlib.contextmanager
def running_daemon(
    home: Path, cwd: Path, *, log_name: str = "daemon", env: Mapping[str, str] | None = None
) -> Iterator[Daemon]:
    """A daemon for the block, stopped with SIGTERM afterwards (killed if it hangs)."""
    daemon = start_daemon(home, cwd, log_name=log_name, env=env)
    try:
        yield daemon
    finally:
        if daemon.proc.poll() is None:
            daemon.stop()


def http(token: str | None) -> httpx2.AsyncClient:
    """An HTTP client for raw requests to the daemon, with ``token`` (if any) as bearer."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    return httpx2.AsyncClient(headers=headers, trust_env=False, timeout=httpx2.Timeout(10.0, read=60.0))


@contextlib.asynccontextmanager
async def mcp_client(daemon: Daemon, mode: str) -> AsyncIterator[Client]:
    """The real MCP client over streamable HTTP, authenticated with the daemon's token."""
    async with (
        http(daemon.token) as client,
        Client(streamable_http_client(daemon.url, http_client=client), mode=mode) as mcp,
    ):
        yield mcp


def file_mode(path: Path) -> int:
    """Permission bits of ``path``."""
    return os.stat(path).st_mode & 0o777
