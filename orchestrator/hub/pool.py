"""The hub: one MCP client per server, and the only way the agent loop reaches a tool.

Above it sits the agent loop, which sees a flat list of namespaced tools and gets a
:class:`ToolOutcome` for every call, never an exception. Below it are MCP ``Client`` connections:
Loom's own servers in-process (the SDK's direct in-memory dispatch) and external servers over stdio
or streamable HTTP. Each connection lives in a task owned by the hub's task group; a server that
fails to start or dies turns its tools into error results and is restarted on demand, with backoff.

Every call runs under a time limit (:mod:`orchestrator.hub.timeouts`) that starts when the call is
dispatched, after any approval; hitting it, or cancelling the caller, cancels the call on the server
(the SDK sends ``notifications/cancelled``). Failures are classified and worded in
:mod:`orchestrator.hub.outcomes`; read-only and idempotent tools are retried per :mod:`orchestrator.hub.retry`.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import anyio
import jsonschema
from anyio.abc import TaskGroup
from mcp import Client, MCPError
from mcp import types as mt
from mcp.server.mcpserver import MCPServer

from orchestrator.config import DEFAULT_CALL_TIMEOUT_S, DEFAULT_STARTUP_TIMEOUT_S, ServerConfig
from orchestrator.hub import outcomes
from orchestrator.hub.names import BUILT_IN_SERVERS, namespaced, sanitize, server_of
from orchestrator.hub.outcomes import ToolOutcome, describe
from orchestrator.hub.retry import RetryPolicy, call_with_retries, may_retry
from orchestrator.hub.schemas import input_validator, share_output_validators
from orchestrator.hub.timeouts import call_timeout, configured_timeout, takes_timeout
from orchestrator.hub.transports import (
    DeferredServer,
    Target,
    connected_tools,
    listed_deferred,
    listed_in_process,
    open_client,
    open_errlog,
    stderr_tail,
)
from orchestrator.models.base import ToolSpec

__all__ = ["FailureHook", "Hub", "HubTool", "RetryPolicy", "ToolOutcome"]

FailureHook = Callable[[str, str], Awaitable[None]]
"""Called with (server, message) whenever a server fails to start or stops answering."""

RESTART_BACKOFF_S = (1.0, 2.0, 5.0, 15.0, 60.0)
"""Seconds before restarting a failed server: the first failure waits the first value, and so on."""


@dataclass(frozen=True, slots=True)
class HubTool:
    """A tool as the hub exposes it."""

    name: str
    """Namespaced, model-safe name."""
    server: str
    remote_name: str
    """The name the server itself uses."""
    description: str
    input_schema: dict[str, Any]
    annotations: mt.ToolAnnotations | None
    validator: jsonschema.protocols.Validator | None
    timeout_s: float = DEFAULT_CALL_TIMEOUT_S
    """The configured limit per call (a ``timeout_s`` argument may stretch it, see :func:`call_timeout`)."""

    @property
    def spec(self) -> ToolSpec:
        """The tool as offered to a model."""
        return ToolSpec(self.name, self.description, self.input_schema)


@dataclass
class _Connection:
    name: str
    target: Target
    client: Client | None = None
    tools: list[mt.Tool] = field(default_factory=list[mt.Tool])
    error: str | None = None
    failures: int = 0
    retry_at: float = 0.0
    generation: int = 0
    """Bumped on every (re)connect so that a dying old connection task cannot clobber a new one."""
    stop: anyio.Event = field(default_factory=anyio.Event)
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    deferred: bool = False
    """An in-process server whose tools are known without a connection: it connects on its first call."""

    @property
    def config(self) -> ServerConfig | None:
        return self.target if isinstance(self.target, ServerConfig) else None

    @property
    def startup_timeout_s(self) -> float:
        return self.target.startup_timeout_s if isinstance(self.target, ServerConfig) else DEFAULT_STARTUP_TIMEOUT_S


class Hub:
    """A pool of MCP client connections with namespaced tools.

    Use as an async context manager: entering connects every server concurrently (bounded by each
    server's start-up timeout) and never raises for a server that fails; leaving closes them all.

    Args:
        internal: Loom's own servers, by server name, called in-process; a deferred one is built on its first call.
        external: Servers from ``mcpServers``, over stdio or streamable HTTP.
        log_dir: Where stdio servers' stderr goes (``NAME.log``).
        on_failure: Told whenever a server fails to start or stops answering.
        timeouts: Seconds per call keyed by namespaced tool name or server name (the top-level
            ``toolTimeouts``); they win over the ``mcpServers`` entries, a tool over a server.
        retry: How transient failures of read-only and idempotent tools are retried.
        restart_backoff_s: Seconds before each successive restart of a failed server.
        visible: Which namespaced tools this session may see (a child's allow-lists, see
            :meth:`orchestrator.policy.narrowing.Bounds.sees`); the others are not listed and calling one is an
            unknown tool. None: all of them.
    """

    def __init__(
        self,
        internal: Mapping[str, MCPServer | DeferredServer],
        external: Sequence[ServerConfig] = (),
        *,
        log_dir: Path | None = None,
        on_failure: FailureHook | None = None,
        timeouts: Mapping[str, float] | None = None,
        retry: RetryPolicy | None = None,
        restart_backoff_s: Sequence[float] = RESTART_BACKOFF_S,
        visible: Callable[[str], bool] | None = None,
    ) -> None:
        self._conns: dict[str, _Connection] = {name: _Connection(name, server) for name, server in internal.items()}
        for cfg in external:
            if cfg.name in self._conns or sanitize(cfg.name) in BUILT_IN_SERVERS:
                raise ValueError(f"server name {cfg.name!r} is taken by one of Loom's built-in servers")
            self._conns[cfg.name] = _Connection(cfg.name, cfg)
        self._log_dir = log_dir
        self._on_failure = on_failure
        self._timeouts = dict(timeouts or {})
        if any(isinstance(v, bool) or not v > 0 for v in self._timeouts.values()):
            raise ValueError(f"timeouts must be positive numbers of seconds, got {self._timeouts}")
        self._retry = retry or RetryPolicy()
        if not restart_backoff_s or min(restart_backoff_s) < 0:
            raise ValueError("restart_backoff_s must be a non-empty sequence of non-negative seconds")
        self._restart_backoff_s = tuple(restart_backoff_s)
        self._visible = visible
        self._tools: dict[str, HubTool] = {}
        self._tg: TaskGroup | None = None
        self._exit = contextlib.AsyncExitStack()

    async def __aenter__(self) -> Self:
        self._tg = await self._exit.enter_async_context(anyio.create_task_group())
        try:
            async with anyio.create_task_group() as starting:
                for conn in self._conns.values():
                    # A session's built-in servers are known by their listing alone: each connects (its lifespan
                    # opening what it holds, a database say) when first called, and a session that never calls
                    # one, or is closed before its first run, never pays for it.
                    target = conn.target
                    if not isinstance(target, MCPServer | ServerConfig):
                        listed = await listed_deferred(target)
                    else:
                        listed = await listed_in_process(target)
                    if listed is None:
                        starting.start_soon(self._connect, conn)
                    else:
                        conn.tools, conn.deferred = listed, True
        except BaseException:
            # cancelled (Ctrl-C) or failed while servers start: close what started, in this task
            for conn in self._conns.values():
                conn.stop.set()
            await self._exit.aclose()
            raise
        self._rebuild_tools()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for conn in self._conns.values():
            conn.stop.set()
        await self._exit.__aexit__(exc_type, exc, tb)

    @property
    def tools(self) -> list[HubTool]:
        """Every tool of every connected server, in a stable order."""
        return list(self._tools.values())

    @property
    def failures(self) -> dict[str, str]:
        """Servers that are down now, with the reason."""
        return {name: c.error for name, c in self._conns.items() if c.error is not None}

    def tool(self, name: str) -> HubTool | None:
        """Look a tool up by its namespaced name."""
        return self._tools.get(name)

    # -- connections -------------------------------------------------------------------------------

    async def _connect(self, conn: _Connection) -> None:
        """Start ``conn``'s connection task and wait until it is ready or has failed."""
        assert self._tg is not None
        conn.stop = anyio.Event()
        conn.generation += 1
        conn.deferred = False
        ready = anyio.Event()
        self._tg.start_soon(self._serve, conn, conn.generation, ready)
        await ready.wait()
        if conn.error is not None:
            await self._report(conn)

    async def _serve(self, conn: _Connection, generation: int, ready: anyio.Event) -> None:
        """Own one connection for its whole life; never raises (failures are recorded on ``conn``)."""
        errlog_offset = 0
        error: str | None = None
        with contextlib.ExitStack() as files:
            errlog = open_errlog(conn.name, conn.target, self._log_dir, files)
            if errlog is not None:
                errlog_offset = errlog.tell()
            with anyio.CancelScope(deadline=anyio.current_time() + conn.startup_timeout_s) as scope:
                try:
                    if not isinstance(conn.target, MCPServer | ServerConfig):
                        conn.target = conn.target.build()  # its first call: the server is built now, once
                    async with open_client(conn.target, errlog) as client:
                        tools = await connected_tools(conn.target, client)
                        share_output_validators(client, tools)
                        scope.deadline = math.inf
                        conn.client, conn.tools, conn.error, conn.failures = client, tools, None, 0
                        ready.set()
                        await conn.stop.wait()
                except Exception as exc:  # any failure of a server is reported, not raised
                    error = describe(exc) + stderr_tail(errlog, errlog_offset)
            if scope.cancelled_caught and not ready.is_set():
                error = f"did not start within {conn.startup_timeout_s:g}s" + stderr_tail(errlog, errlog_offset)
            if conn.generation != generation:
                return  # a newer connection owns ``conn`` now
            conn.client = None
            conn.error = error or conn.error
            # A stop that was asked for (by ``_lost`` after a call saw the server die) already set the
            # restart time; counting the same death twice would push it back under a waiting retry.
            if conn.error is not None and not conn.stop.is_set():
                self._schedule_restart(conn)
            ready.set()

    def _schedule_restart(self, conn: _Connection) -> None:
        conn.failures += 1
        backoff = self._restart_backoff_s[min(conn.failures, len(self._restart_backoff_s)) - 1]
        conn.retry_at = anyio.current_time() + backoff

    async def _report(self, conn: _Connection) -> None:
        if self._on_failure is not None and conn.error is not None:
            await self._on_failure(conn.name, conn.error)

    def _rebuild_tools(self) -> None:
        tools: dict[str, HubTool] = {}
        for conn in self._conns.values():
            for tool in conn.tools:
                name = namespaced(conn.name, tool.name, frozenset(tools))
                if self._visible is not None and not self._visible(name):
                    continue  # a child's allow-list: what it may not use is not offered at all
                tools[name] = HubTool(
                    name=name,
                    server=conn.name,
                    remote_name=tool.name,
                    description=tool.description or tool.title or tool.name,
                    input_schema=tool.input_schema,
                    annotations=tool.annotations,
                    validator=input_validator(tool.input_schema),
                    timeout_s=configured_timeout(
                        self._timeouts, name=name, server=conn.name, remote_name=tool.name, server_config=conn.config
                    ),
                )
        self._tools = tools

    async def _revive(self, conn: _Connection) -> None:
        """Restart a failed server if its backoff has passed (one restart at a time)."""
        async with conn.lock:
            if conn.client is not None or anyio.current_time() < conn.retry_at:
                return
            await self._connect(conn)
            if conn.client is not None:
                self._rebuild_tools()

    # -- calls -------------------------------------------------------------------------------------

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        """Check and call a tool by its namespaced name. Never raises for a tool or server failure."""
        problem = await self.check(name, arguments)
        return problem if problem is not None else await self.dispatch(name, arguments)

    async def check(self, name: str, arguments: dict[str, Any]) -> ToolOutcome | None:
        """The error result a call would get before reaching its server, or None if it may go ahead.

        Catches unknown tools (restarting a failed server whose tools the name may belong to) and
        arguments that do not match the tool's input schema. Nothing is executed.
        """
        tool = self._tools.get(name)
        down = self._conns.get(server_of(name))
        if tool is None and down is not None and down.client is None and not down.deferred:
            await self._revive(down)  # its tools may be back, or the model guessed a name
            tool = self._tools.get(name)
            if tool is None:
                return outcomes.server_unavailable(down.name, down.error)
        if tool is None:
            return outcomes.unknown_tool(name, sorted(self._tools))
        if tool.validator is not None:
            problem = _validation_problem(tool.validator, arguments)
            if problem is not None:
                return outcomes.invalid_arguments(name, problem)
        return None

    async def dispatch(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        """Send a call that :meth:`check` accepted to its server, under the tool's time limit.

        The limit starts here, so time spent waiting for an approval before this never counts. A
        read-only or idempotent tool whose server was unavailable is retried (after a restart) per
        the hub's :class:`RetryPolicy`. Cancelling the caller cancels the call on the server too.
        """
        tool = self._tools.get(name)
        if tool is None:  # the server was restarted since the check and no longer has it
            return outcomes.unknown_tool(name, sorted(self._tools))
        conn = self._conns[tool.server]
        return await call_with_retries(
            lambda: self._attempt(name, arguments),
            self._retry,
            retryable=may_retry(tool.annotations),
            not_before=lambda: conn.retry_at,
        )

    async def _attempt(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        """Send one call; every failure becomes an outcome."""
        tool = self._tools.get(name)
        if tool is None:
            return outcomes.unknown_tool(name, sorted(self._tools))
        conn = self._conns[tool.server]
        if conn.client is None:
            await self._revive(conn)
        client = conn.client
        if client is None:
            return outcomes.server_unavailable(conn.name, conn.error)
        limit = call_timeout(tool.timeout_s, tool.input_schema, arguments)
        result: mt.CallToolResult | None = None
        # Cancelling the SDK's request (this scope's deadline, or the caller's cancellation) makes it
        # send notifications/cancelled, so the server stops the work instead of finishing it unseen.
        with anyio.move_on_after(limit):
            try:
                result = await client.call_tool(tool.remote_name, arguments)
            except MCPError as exc:
                if exc.code != mt.CONNECTION_CLOSED or "closed" not in exc.message.lower():
                    return outcomes.protocol_error(name, exc)
                return await self._lost(conn, client, exc, name, tool.annotations)
            except Exception as exc:  # a broken connection must become an error result
                return await self._lost(conn, client, exc, name, tool.annotations)
        if result is None:
            read_only = tool.annotations is not None and tool.annotations.read_only_hint is True
            return outcomes.timed_out(name, limit, read_only=read_only, takes_timeout=takes_timeout(tool.input_schema))
        return outcomes.from_result(result)

    async def _lost(
        self, conn: _Connection, client: Client, exc: BaseException, name: str, annotations: mt.ToolAnnotations | None
    ) -> ToolOutcome:
        """The connection broke during a call: report it, let the next call restart the server.

        The request had been sent, so the call may have taken effect before the server died: the outcome is
        unknown, not merely "unavailable".
        """
        if conn.client is client:  # not already replaced by a restart that a concurrent call made
            conn.error = f"stopped answering: {describe(exc)}"
            conn.client = None
            self._schedule_restart(conn)
            conn.stop.set()
            await self._report(conn)
        read_only = annotations is not None and annotations.read_only_hint is True
        return outcomes.outcome_unknown(name, conn.name, f"stopped answering: {describe(exc)}", read_only=read_only)


def _validation_problem(validator: jsonschema.protocols.Validator, arguments: dict[str, Any]) -> str | None:
    errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
    if not errors:
        return None
    parts = []
    for err in errors[:3]:
        where = "/".join(str(p) for p in err.absolute_path)
        parts.append(f"{where}: {err.message}" if where else err.message)
    more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
    return "; ".join(parts) + more
