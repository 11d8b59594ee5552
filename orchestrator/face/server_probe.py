"""What ``list_servers`` reports: an open session's servers as its hub sees them, or the configured ones probed.

Above it is the face's ``list_servers`` (:mod:`orchestrator.face.server_tools`); below it the hub's transports
(:mod:`orchestrator.hub.transports`), reused so a probe connects exactly as a session would. A probe starts each
configured server on its own connection, lists its tools, times one more listing as its latency and closes it, all
within the server's start-up timeout; the probes run concurrently, so one slow server delays the answer by its own
timeout at most. Loom's built-in servers are listed in-process (nothing of theirs is opened).
"""

from __future__ import annotations

import contextlib
import errno
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread
from mcp import MCPError

from orchestrator.config import ServerConfig
from orchestrator.hub.outcomes import describe
from orchestrator.hub.transports import list_all_tools, listed_deferred, open_client, open_errlog, stderr_tail
from orchestrator.protocol_servers import ServerInfo

if TYPE_CHECKING:
    from orchestrator.hub.pool import Hub
    from orchestrator.hub.supervisor import ServerHealth
    from orchestrator.hub.transports import DeferredServer
    from orchestrator.runtime.runtime import Runtime

__all__ = ["hub_servers", "plain_error", "probe_servers"]


def hub_servers(hub: Hub) -> list[ServerInfo]:
    """The live state of an open session's servers, as its hub's supervisor keeps it (``Hub.statuses()``)."""
    return [_from_health(h) for h in hub.statuses()]


def _from_health(health: ServerHealth) -> ServerInfo:
    return ServerInfo(
        name=health.name,
        transport=health.transport,
        state=health.state,
        built_in=health.transport == "in-process",
        tools=health.tools,
        restarts=health.restarts,
        latency_ms=None if health.latency_ms is None else round(health.latency_ms, 1),
        last_error=health.last_error,
        since=health.since or None,
        stderr_tail=health.stderr_tail,
    )


async def probe_servers(runtime: Runtime) -> list[ServerInfo]:
    """Loom's built-in servers (listed in-process), then each configured server probed on a fresh connection."""
    found: dict[str, ServerInfo] = {}
    built_in = await _built_ins(runtime)
    configured = list(runtime.servers)
    async with anyio.create_task_group() as tg:
        for name, target in built_in.items():
            tg.start_soon(_list_built_in, name, target, found)
        for cfg in configured:
            tg.start_soon(_probe_external, cfg, runtime.home / "logs", found)
    order = [*built_in, *(c.name for c in configured)]
    return [found[name] for name in order if name in found]


async def _built_ins(runtime: Runtime) -> dict[str, DeferredServer | str]:
    """The built-in servers a session gets, prepared over Loom's home (nothing of theirs is opened).

    One that cannot be prepared (a shell sandbox required where none works, say) is the reason why instead.
    """
    from orchestrator.home import MEMORY_DB_NAME
    from orchestrator.runtime.session_tools import prepare_session_tools
    from servers import fs, shell, subagents
    from servers import memory as servers_memory

    home, face = runtime.home, runtime.face
    makers: dict[str, Callable[[], DeferredServer]] = {
        "fs": lambda: fs.prepare_server([home]),
        "shell": lambda: shell.prepare_server(home, sandbox=runtime.shell.sandbox, network=runtime.shell.network),
        "memory": lambda: servers_memory.prepare_server(home / MEMORY_DB_NAME),
        "loom": lambda: prepare_session_tools(runtime.log.store, "", home=home, project=home),
    }
    if face is not None:
        makers["subagents"] = lambda: subagents.prepare_server(
            subagents.in_process(face), session_id=None, cwd=home, home=home, project=None
        )

    def prepare() -> dict[str, DeferredServer | str]:
        # Blocking (roots resolved, the sandbox settled), so in a worker thread as the runtime does it.
        home.mkdir(parents=True, exist_ok=True)
        prepared: dict[str, DeferredServer | str] = {}
        for name, make in makers.items():
            try:
                prepared[name] = make()
            except Exception as exc:  # reported as that server's failure; the others are still listed
                prepared[name] = describe(exc)
        return prepared

    return await anyio.to_thread.run_sync(prepare)


async def _list_built_in(name: str, target: DeferredServer | str, found: dict[str, ServerInfo]) -> None:
    failed = ServerInfo(name=name, transport="in-process", state="failed", built_in=True)
    if isinstance(target, str):
        found[name] = failed.model_copy(update={"last_error": target})
        return
    started = time.perf_counter()
    try:
        tools = await listed_deferred(target)
    except Exception as exc:  # a built-in that cannot be built is reported like any failed server
        found[name] = failed.model_copy(update={"last_error": describe(exc)})
        return
    latency = round((time.perf_counter() - started) * 1000, 1)
    count = len(tools or [])
    found[name] = ServerInfo(
        name=name, transport="in-process", state="ready", built_in=True, tools=count, latency_ms=latency
    )


async def _probe_external(cfg: ServerConfig, log_dir: Path, found: dict[str, ServerInfo]) -> None:
    """Start ``cfg``'s server, list its tools and time one more listing; never raises."""
    base = ServerInfo(name=cfg.name, transport=cfg.transport, state="failed")
    if getattr(cfg, "disabled", False):  # ``"disabled": true`` in mcpServers: never started
        found[cfg.name] = base.model_copy(update={"state": "stopped", "last_error": "disabled in its config"})
        return
    tail = error = ""
    with contextlib.ExitStack() as files:
        errlog = open_errlog(cfg.name, cfg, log_dir, files)
        offset = errlog.tell() if errlog is not None else 0
        with anyio.move_on_after(cfg.startup_timeout_s) as scope:
            try:
                async with open_client(cfg, errlog) as client:
                    tools = await list_all_tools(client)
                    started = time.perf_counter()
                    await client.list_tools()
                    latency = round((time.perf_counter() - started) * 1000, 1)
                found[cfg.name] = base.model_copy(
                    update={"state": "ready", "tools": len(tools), "latency_ms": latency, "since": time.time()}
                )
                return
            except Exception as exc:  # every failure of a server is reported, in plain words
                tail = stderr_tail(errlog, offset)
                error = plain_error(cfg, exc)
        if scope.cancelled_caught:
            tail = stderr_tail(errlog, offset)
            error = f"did not start within {cfg.startup_timeout_s:g}s"
    found[cfg.name] = base.model_copy(
        update={
            "last_error": error + tail,
            "stderr_tail": tail.removeprefix("; its stderr ends with: "),
            "since": time.time(),
        }
    )


def plain_error(cfg: ServerConfig, exc: BaseException) -> str:
    """Why ``cfg``'s server could not be reached, in the terms of its config rather than of the exception."""
    leaf = _leaf(exc)
    if cfg.transport == "stdio":
        command = cfg.command
        if isinstance(leaf, FileNotFoundError) or getattr(leaf, "errno", None) == errno.ENOENT:
            return f"cannot start {command!r}: no such command or file (check its 'command' in mcpServers)"
        if isinstance(leaf, PermissionError):
            return f"cannot start {command!r}: permission denied (is it executable?)"
        if isinstance(leaf, MCPError) and "closed" in leaf.message.lower():
            return f"{command!r} exited or closed its output before answering as an MCP server"
    else:
        name = type(leaf).__name__
        if "Connect" in name:
            return f"nothing answers at {cfg.url} ({describe(leaf)})"
        if "HTTPStatus" in name:
            return f"{cfg.url} refused the connection: {describe(leaf)}"
    if isinstance(leaf, MCPError):
        return f"it did not answer as an MCP server: {leaf.message}"
    return describe(leaf)


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc
