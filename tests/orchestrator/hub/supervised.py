"""Helpers for the supervisor's tests: the supervised test server as a stdio config or a real uvicorn subprocess."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import anyio

from orchestrator.config import ServerConfig
from orchestrator.hub.supervisor import ServerHealth

REPO = Path(__file__).resolve().parents[3]
SCRIPT = str(Path(__file__).parent / "supervised_test_server.py")
FAST = {"health_interval_s": 0.3, "health_timeout_s": 1.0, "startup_timeout_s": 20.0, "call_timeout_s": 10.0}
"""Health checks every 0.3 s, each given 1 s: what a user would configure as 30 s and 10 s, made quick."""


def stdio_config(name: str = "sup", **settings: Any) -> ServerConfig:
    """The test server over stdio, supervised with :data:`FAST` settings unless ``settings`` say otherwise."""
    env = {"PYTHONPATH": str(REPO), **settings.pop("env", {})}
    return ServerConfig(
        name=name, transport="stdio", command=sys.executable, args=(SCRIPT, "stdio"), env=env, **(FAST | settings)
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@dataclass
class HttpServer:
    """The test server under uvicorn in its own process, which a test may kill and start again on the same port."""

    kind: Literal["http", "sse"]
    port: int
    env: dict[str, str]
    log: Path
    proc: subprocess.Popen[bytes] | None = None
    pids: list[int] = field(default_factory=list[int])

    def start(self) -> None:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, SCRIPT, self.kind, str(self.port)],
                env={**os.environ, "PYTHONPATH": str(REPO), **self.env},
                stdout=log,
                stderr=log,
            )
        self.pids.append(self.proc.pid)
        deadline = time.monotonic() + 20
        while True:  # bounded: until uvicorn accepts connections
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the test server did not start: {self.log.read_text()[-400:]}") from None
                time.sleep(0.05)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def config(self, name: str = "sup", **settings: Any) -> ServerConfig:
        path = "/sse" if self.kind == "sse" else "/mcp"
        return ServerConfig(
            name=name, transport=self.kind, url=f"http://127.0.0.1:{self.port}{path}", **(FAST | settings)
        )


@contextmanager
def http_server(tmp_path: Path, kind: Literal["http", "sse"] = "http", **env: str) -> Iterator[HttpServer]:
    """A running test server over ``kind`` ("http" or "sse"), killed when the block ends."""
    server = HttpServer(kind, free_port(), env, tmp_path / f"{kind}-server.log")
    server.start()
    try:
        yield server
    finally:
        if server.proc is not None and server.proc.poll() is None:
            server.kill()


@dataclass
class States:
    """What ``on_state`` was told, in order; ``wait_for`` blocks (bounded) until a state shows up."""

    seen: list[tuple[ServerHealth, str]] = field(default_factory=list[tuple[ServerHealth, str]])

    async def __call__(self, health: ServerHealth, reason: str) -> None:
        self.seen.append((health, reason))

    @property
    def states(self) -> list[str]:
        return [h.state for h, _ in self.seen]

    async def wait_for(self, state: str, *, after: int = 0, timeout: float = 20) -> tuple[ServerHealth, str]:
        """The first ``state`` reported at index ``after`` or later."""
        with anyio.fail_after(timeout):
            while True:
                for health, reason in self.seen[after:]:
                    if health.state == state:
                        return health, reason
                await anyio.sleep(0.02)


def with_settings(cfg: ServerConfig, **settings: Any) -> ServerConfig:
    return replace(cfg, **settings)
