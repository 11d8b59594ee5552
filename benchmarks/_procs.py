"""Real processes for the delegation, daemon and concurrency figures: ``loom serve``, ``loom mcp``, the ping server.

Everything here is a real subprocess of the venv, reached as another agent reaches it: the ``loom``
console script next to ``sys.executable``, over stdio or over HTTP on 127.0.0.1, through the MCP SDK's
``Client``. Each benchmark passes its own temporary ``LOOM_HOME``; the environment is stripped of model
credentials, Loom settings and proxies, as the CLI tests do, so nothing from the machine leaks in.

Clients connect with ``mode="legacy"`` (the ``initialize`` handshake), which is how the agents that
register Loom in their ``mcp.json`` connect today; both sides of a ratio use the same mode.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import anyio
import httpx2
from anyio.abc import Process
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from benchmarks.startup import loom_script

REPO_ROOT = Path(__file__).resolve().parents[1]
MODE = "legacy"
"""The handshake today's agents make; see the module docstring."""
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0
CALL_TIMEOUT_S = 60.0
_DROPPED_PREFIXES = ("ANTHROPIC_", "OPENAI_", "LOOM_")
_PROXY_VARS = frozenset({"http_proxy", "https_proxy", "all_proxy", "no_proxy"})


def loom_env(home: Path) -> dict[str, str]:
    """This process's environment minus credentials, Loom settings and proxies, with ``LOOM_HOME=home``."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(_DROPPED_PREFIXES) and key.lower() not in _PROXY_VARS
    }
    env["LOOM_HOME"] = str(home)
    env["NO_PROXY"] = "127.0.0.1,localhost"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    return env


def write_script(path: Path, turns: Sequence[Mapping[str, Any]]) -> str:
    """Write a scripted-model file and return its model spec, ``scripted:PATH``."""
    path.write_text(json.dumps({"turns": list(turns)}), encoding="utf-8")
    return f"scripted:{path}"


def text_turns(count: int) -> list[dict[str, Any]]:
    """``count`` one-line answers with no tool call: each ``send_message`` is one model call, then done."""
    return [{"text": f"Done ({i})."} for i in range(count)]


def structured(result: Any, tool: str) -> dict[str, Any]:
    """A tool result's structured content; raises if the call failed, so that no error path is timed."""
    if result.is_error or not isinstance(result.structured_content, dict):
        text = " ".join(getattr(block, "text", "") for block in result.content)
        raise AssertionError(f"{tool} failed: {text[:500]}")
    content: dict[str, Any] = result.structured_content
    return content


async def delegate(client: Client, cwd: Path, model: str) -> str:
    """``create_session`` (bypass, headless) for ``model`` in ``cwd``; the session id."""
    args = {"cwd": str(cwd), "model": model, "mode": "bypass", "headless": True}
    return str(structured(await client.call_tool("create_session", args), "create_session")["session_id"])


async def send(client: Client, session_id: str, wait_s: float = 30.0) -> dict[str, Any]:
    """``send_message(wait_s)``; raises unless the run completed within the wait."""
    args = {"session_id": session_id, "text": "Go on.", "wait_s": wait_s}
    run = structured(await client.call_tool("send_message", args), "send_message")
    if wait_s > 0 and run["status"] != "completed":
        raise AssertionError(f"send_message ended {run['status']}: {run.get('reason')}")
    return run


async def ping(client: Client, x: int) -> None:
    """One raw ``ping`` call, checked."""
    structured(await client.call_tool("ping", {"x": x}), "ping")


@contextlib.asynccontextmanager
async def stdio_mcp(argv: Sequence[str], env: Mapping[str, str], cwd: Path, errlog: TextIO) -> AsyncIterator[Client]:
    """A connected MCP client of ``argv`` run as a subprocess over stdio."""
    params = StdioServerParameters(command=argv[0], args=list(argv[1:]), env=dict(env), cwd=str(cwd))
    async with Client(stdio_client(params, errlog=errlog), mode=MODE, read_timeout_seconds=CALL_TIMEOUT_S) as client:
        yield client


def loom_mcp_argv() -> list[str]:
    """``loom mcp``: embedded when its home has no daemon, attached to the daemon when it has one."""
    return [str(loom_script()), "mcp"]


def ping_argv(*extra: str) -> list[str]:
    """The minimal MCP server (:mod:`benchmarks.ping_server`)."""
    return [sys.executable, "-m", "benchmarks.ping_server", *extra]


def http_client(token: str | None = None) -> httpx2.AsyncClient:
    """A keep-alive HTTP client for 127.0.0.1 (no proxies from the environment), with ``token`` as bearer."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    limits = httpx2.Limits(max_connections=None, max_keepalive_connections=None)
    return httpx2.AsyncClient(
        headers=headers, trust_env=False, timeout=httpx2.Timeout(10.0, read=CALL_TIMEOUT_S), limits=limits
    )


@contextlib.asynccontextmanager
async def http_mcp(url: str, token: str | None = None) -> AsyncIterator[Client]:
    """A connected MCP client over streamable HTTP."""
    async with (
        http_client(token) as http,
        Client(streamable_http_client(url, http_client=http), mode=MODE, read_timeout_seconds=CALL_TIMEOUT_S) as client,
    ):
        yield client


@dataclass(frozen=True)
class Daemon:
    """A running ``loom serve``: where it listens, its token and its pid."""

    url: str
    token: str
    pid: int
    home: Path

    @property
    def origin(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return self.url.removesuffix("/mcp")


async def _stop(proc: Process) -> None:
    """SIGTERM, a bounded wait, then SIGKILL: a benchmark never leaves a process behind."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
    with anyio.move_on_after(STOP_TIMEOUT_S):
        await proc.wait()
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        with anyio.CancelScope(shield=True):
            await proc.wait()


@contextlib.asynccontextmanager
async def loom_serve(home: Path, cwd: Path) -> AsyncIterator[Daemon]:
    """``loom serve --port 0`` for ``home``, found through its discovery file, stopped with SIGTERM after."""
    await anyio.Path(home).mkdir(parents=True, exist_ok=True)
    await anyio.Path(cwd).mkdir(parents=True, exist_ok=True)
    with (cwd / "daemon.stderr").open("wb") as err:
        proc = await anyio.open_process(
            [str(loom_script()), "serve", "--port", "0"],
            cwd=cwd,
            env=loom_env(home),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        try:
            with anyio.fail_after(START_TIMEOUT_S):
                found = await _discovered(home, proc)
            token = (home / "daemon.token").read_text(encoding="utf-8").strip()
            yield Daemon(url=found["url"], token=token, pid=proc.pid, home=home)
        finally:
            with anyio.CancelScope(shield=True):
                await _stop(proc)


async def _discovered(home: Path, proc: Process) -> dict[str, Any]:
    while True:
        with contextlib.suppress(OSError, ValueError):
            found: dict[str, Any] = json.loads((home / "daemon.json").read_text(encoding="utf-8"))
            if found.get("pid") == proc.pid:
                return found
        if proc.returncode is not None:
            raise RuntimeError(f"loom serve exited {proc.returncode} before listening (see daemon.stderr)")
        await anyio.sleep(0.05)


@contextlib.asynccontextmanager
async def ping_http(cwd: Path) -> AsyncIterator[str]:
    """The ping server over streamable HTTP in a subprocess; its URL."""
    with (cwd / "ping-http.stderr").open("wb") as err:
        proc = await anyio.open_process(ping_argv("--http"), cwd=REPO_ROOT, env=loom_env(cwd), stderr=err)
        try:
            assert proc.stdout is not None
            line = b""
            with anyio.fail_after(START_TIMEOUT_S):
                while not line.endswith(b"\n"):
                    line += await proc.stdout.receive()
            yield line.decode().strip()
        finally:
            with anyio.CancelScope(shield=True):
                await _stop(proc)


def rss_bytes(pid: int) -> int:
    """Resident set size of process ``pid`` (Linux ``/proc``)."""
    for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time process ``pid`` has used so far (Linux ``/proc``, in clock ticks of 10 ms)."""
    fields = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def child_pid(marker: str) -> int:
    """The pid of this process's child whose command line contains ``marker`` (the newest, if several)."""
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue
        if parent == os.getpid() and marker in command:
            found.append(int(entry.name))
    if not found:
        raise RuntimeError(f"no child process running {marker!r}")
    return max(found)


async def timed(coro: Awaitable[object]) -> float:
    """Seconds the awaitable took."""
    started = time.perf_counter()
    await coro
    return time.perf_counter() - started
