"""The hub: one MCP client per server, and the only way the agent loop reaches a tool.

Above it sits the agent loop, which sees a flat list of namespaced tools and gets a
:class:`ToolOutcome` for every call, never an exception. Below it are MCP ``Client`` connections:
Loom's own servers in-process (the SDK's direct in-memory dispatch) and external servers over stdio
streamable HTTP or legacy SSE. The connections are the supervisor's (:mod:`orchestrator.hub.supervisor`): it reports
each external server's state, checks idle connections, restarts failed servers with backoff in the background and
refetches a server's tools when it announces a change, after which :attr:`Hub.tools` (read by the loop each step)
offers the new list.

Every call runs under a time limit (:mod:`orchestrator.hub.timeouts`) that starts when the call is
dispatched, after any approval; hitting it, or cancelling the caller, cancels the call on the server
(the SDK sends ``notifications/cancelled``). Failures are classified and worded in
:mod:`orchestrator.hub.outcomes`; read-only and idempotent tools are retried per :mod:`orchestrator.hub.retry`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import anyio
import anyio.lowlevel
import jsonschema
from mcp import Client, MCPError
from mcp import types as mt
from mcp.server.mcpserver import MCPServer
from mcp.shared.dispatcher import ProgressFnT

from orchestrator.config import DEFAULT_CALL_TIMEOUT_S, ServerConfig
from orchestrator.hub import outcomes
from orchestrator.hub.names import BUILT_IN_SERVERS, namespaced, sanitize, server_of
from orchestrator.hub.outcomes import ToolOutcome, describe
from orchestrator.hub.retry import RetryPolicy, call_with_retries, may_retry
from orchestrator.hub.schemas import input_validator
from orchestrator.hub.supervisor import (
    Connection,
    FailureHook,
    ServerHealth,
    ServerUnavailableError,
    StateHook,
    Supervisor,
)
from orchestrator.hub.timeouts import call_timeout, configured_timeout, takes_timeout
from orchestrator.hub.transports import DeferredServer, listed_deferred, listed_in_process
from orchestrator.models.base import ToolSpec

if TYPE_CHECKING:
    from orchestrator.hub.client_caps import ClientHooks

__all__ = [
    "FailureHook",
    "Hub",
    "HubTool",
    "RetryPolicy",
    "ServerHealth",
    "ServerUnavailableError",
    "StateHook",
    "ToolOutcome",
]

RESTART_BACKOFF_S = (1.0, 2.0, 5.0, 15.0, 60.0)
"""Seconds before restarting a failed server: the first failure waits the first value, and so on."""
_NOTICE_TURNS = 8
"""Event-loop turns a finished call of an external server waits for a list change it announced to be noticed."""
RESTART_WAIT_S = 5.0
"""A call to a server whose restart is due within this many seconds waits for it (nothing was sent yet)."""


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


class Hub:
    """A pool of MCP client connections with namespaced tools.

    Use as an async context manager: entering connects every server concurrently (bounded by each
    server's start-up timeout) and never raises for a server that fails; leaving closes them all.

    Args:
        internal: Loom's own servers, by server name, called in-process; a deferred one is built on its first call.
        external: Servers from ``mcpServers``, over stdio, streamable HTTP or SSE (a ``disabled`` one is listed,
            as stopped, and never started).
        log_dir: Where stdio servers' stderr goes (``NAME.log``).
        on_failure: Told whenever a server fails to start or stops answering.
        on_state: Told each external server's health after every change of state, with the reason.
        client_hooks: The session's callbacks for external servers' ``Client`` (roots, elicitation, sampling, logs).
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
        on_state: StateHook | None = None,
        client_hooks: ClientHooks | None = None,
        timeouts: Mapping[str, float] | None = None,
        retry: RetryPolicy | None = None,
        restart_backoff_s: Sequence[float] = RESTART_BACKOFF_S,
        visible: Callable[[str], bool] | None = None,
    ) -> None:
        self._conns: dict[str, Connection] = {
            name: Connection(name, server, state="ready") for name, server in internal.items()
        }
        for cfg in external:
            if cfg.name in self._conns or sanitize(cfg.name) in BUILT_IN_SERVERS:
                raise ValueError(f"server name {cfg.name!r} is taken by one of Loom's built-in servers")
            self._conns[cfg.name] = Connection(cfg.name, cfg)
        self._timeouts = dict(timeouts or {})
        if any(isinstance(v, bool) or not v > 0 for v in self._timeouts.values()):
            raise ValueError(f"timeouts must be positive numbers of seconds, got {self._timeouts}")
        self._retry = retry or RetryPolicy()
        if not restart_backoff_s or min(restart_backoff_s) < 0:
            raise ValueError("restart_backoff_s must be a non-empty sequence of non-negative seconds")
        self._sup = Supervisor(
            self._conns,
            tools_changed=self._rebuild_tools,
            log_dir=log_dir,
            on_state=on_state,
            on_failure=on_failure,
            restart_backoff_s=restart_backoff_s,
            client_hooks=client_hooks,
        )
        self._visible = visible
        self.client_hooks = client_hooks
        """The session's answers to its servers' requests (the loop says which call a request belongs to)."""
        self._tools: dict[str, HubTool] = {}
        self._specs: list[ToolSpec] = []
        self._exit = contextlib.AsyncExitStack()

    async def __aenter__(self) -> Self:
        tg = await self._exit.enter_async_context(anyio.create_task_group())
        self._sup.start_watching(tg)
        try:
            async with anyio.create_task_group() as starting:
                for conn in self._conns.values():
                    # A session's built-in servers are known by their listing alone: each connects (its lifespan
                    # opening what it holds, a database say) when first called, and a session that never calls
                    # one, or is closed before its first run, never pays for it.
                    target = conn.target
                    if isinstance(target, ServerConfig):
                        if not target.disabled:
                            starting.start_soon(self._sup.connect, conn)
                        continue
                    if not isinstance(target, MCPServer):
                        listed = await listed_deferred(target)
                    else:
                        listed = await listed_in_process(target)
                    if listed is None:
                        starting.start_soon(self._sup.connect, conn)
                    else:
                        conn.tools, conn.deferred = listed, True
        except BaseException:
            # cancelled (Ctrl-C) or failed while servers start: close what started, in this task
            await self._sup.close()
            await self._exit.aclose()
            raise
        self._rebuild_tools()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._sup.close()
        await self._exit.__aexit__(exc_type, exc, tb)

    @property
    def tools(self) -> list[HubTool]:
        """Every tool of every connected server, in a stable order (changed when a server's list changes)."""
        return list(self._tools.values())

    @property
    def tool_specs(self) -> list[ToolSpec]:
        """:attr:`tools` as offered to a model; the same list object until the tools change."""
        return self._specs

    @property
    def failures(self) -> dict[str, str]:
        """Servers that are down now, with the reason."""
        return {name: c.error for name, c in self._conns.items() if c.error is not None}

    def tool(self, name: str) -> HubTool | None:
        """Look a tool up by its namespaced name."""
        return self._tools.get(name)

    def statuses(self) -> list[ServerHealth]:
        """Every server's health now, in configuration order.

        Built-in servers are ``ready`` (connected in-process on first use); a ``disabled`` external one is ``stopped``.
        """
        return [self._sup.health(conn) for conn in self._conns.values()]

    def server_names(self) -> list[str]:
        """The servers this hub may reach (a ``disabled`` one is not among them)."""
        return [n for n, c in self._conns.items() if c.config is None or not c.config.disabled]

    async def client(self, server: str) -> Client:
        """``server``'s connected ``Client``, connecting (or restarting, once its backoff has passed) on demand.

        Raises:
            ServerUnavailableError: no such server, it is disabled, or it cannot be reached now (with the reason).
        """
        conn = self._conns.get(server)
        if conn is None:
            raise ServerUnavailableError(f"no MCP server named {server!r}; the servers are {self.server_names()}")
        if conn.config is not None and conn.config.disabled:
            raise ServerUnavailableError(f"the MCP server {server!r} is disabled in its config ({conn.config.source})")
        if conn.client is None:
            await self._revive(conn)
        if conn.client is None:
            raise ServerUnavailableError(f"the MCP server {server!r} is unavailable: {conn.error or 'not connected'}")
        client: Client = conn.client
        return client

    def capabilities(self, server: str) -> mt.ServerCapabilities | None:
        """What ``server`` declared when it connected; None while it is not connected (nothing is connected here)."""
        conn = self._conns.get(server)
        client = conn.client if conn is not None else None
        return client.server_capabilities if client is not None else None

    async def refresh(self, server: str) -> None:
        """Fetch ``server``'s tools (and resources and prompts) again now, as a list change would.

        Raises:
            ServerUnavailableError: as :meth:`client` does.
        """
        await self.client(server)
        await self._sup.refresh(self._conns[server])

    # -- connections -------------------------------------------------------------------------------

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
        self._specs = [t.spec for t in tools.values()]

    async def _revive(self, conn: Connection) -> None:
        if conn.config is not None and conn.config.disabled:
            return
        await self._sup.revive(conn)

    # -- calls -------------------------------------------------------------------------------------

    async def call(self, name: str, arguments: dict[str, Any], *, progress: ProgressFnT | None = None) -> ToolOutcome:
        """Check and call a tool by its namespaced name. Never raises for a tool or server failure.

        ``progress`` receives the server's progress notifications for this call (``progress, total, message``).
        """
        problem = await self.check(name, arguments)
        return problem if problem is not None else await self.dispatch(name, arguments, progress=progress)

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
                cfg = down.config
                why = f"it is disabled in its config, {cfg.source}" if cfg is not None and cfg.disabled else down.error
                return outcomes.server_unavailable(down.name, why)
        if tool is None:
            return outcomes.unknown_tool(name, sorted(self._tools))
        if tool.validator is not None:
            problem = _validation_problem(tool.validator, arguments)
            if problem is not None:
                return outcomes.invalid_arguments(name, problem)
        return None

    async def dispatch(
        self, name: str, arguments: dict[str, Any], *, progress: ProgressFnT | None = None
    ) -> ToolOutcome:
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
            lambda: self._attempt(name, arguments, progress),
            self._retry,
            retryable=may_retry(tool.annotations),
            not_before=lambda: conn.retry_at,
        )

    async def _attempt(self, name: str, arguments: dict[str, Any], progress: ProgressFnT | None) -> ToolOutcome:
        """Send one call; every failure becomes an outcome."""
        tool = self._tools.get(name)
        if tool is None:
            return outcomes.unknown_tool(name, sorted(self._tools))
        conn = self._conns[tool.server]
        if conn.client is None:
            due = conn.retry_at - anyio.current_time()
            if conn.config is not None and conn.error is not None and 0 < due <= RESTART_WAIT_S:
                await anyio.sleep(due)  # its restart is about to happen: nothing was sent, so waiting is harmless
            await self._revive(conn)
        client = conn.client
        if client is None:
            return outcomes.server_unavailable(conn.name, conn.error)
        limit = call_timeout(tool.timeout_s, tool.input_schema, arguments)
        result: mt.CallToolResult | None = None
        started = anyio.current_time()
        conn.busy += 1
        try:
            # Cancelling the SDK's request (this scope's deadline, or the caller's cancellation) makes it
            # send notifications/cancelled, so the server stops the work instead of finishing it unseen.
            with anyio.move_on_after(limit):
                try:
                    # Only external servers get a progress token: Loom's own never report progress, and the token
                    # costs an in-process call about 250 µs of the SDK's (a third of a loop step's dispatch).
                    wants = progress if conn.config is not None else None
                    result = await client.call_tool(tool.remote_name, arguments, progress_callback=wants)
                except MCPError as exc:
                    if exc.code != mt.CONNECTION_CLOSED or "closed" not in exc.message.lower():
                        return outcomes.protocol_error(name, exc)
                    return await self._lost(conn, client, exc, name, tool.annotations)
                except Exception as exc:  # a broken connection must become an error result
                    return await self._lost(conn, client, exc, name, tool.annotations)
        finally:
            conn.busy -= 1
        if result is None:
            if conn.config is not None:
                # Slow tool or wedged server? A server that does not answer a health check either is restarted
                # (by its watcher, after the backoff), so the run's next call reaches a fresh one.
                await self._sup.check(conn, client, strict=True)
            read_only = tool.annotations is not None and tool.annotations.read_only_hint is True
            return outcomes.timed_out(name, limit, read_only=read_only, takes_timeout=takes_timeout(tool.input_schema))
        conn.latency_ms = (anyio.current_time() - started) * 1000
        conn.last_ok = anyio.current_time()
        if conn.config is not None:
            # A server that changes its list during a call (adding a tool, say) announces it before it answers, but
            # the SDK hands notifications to tasks of their own: a few turns of the event loop let them land, and
            # the new list is fetched before the result returns, so the step after this one already offers it.
            for _ in range(_NOTICE_TURNS):
                if conn.dirty:
                    break
                await anyio.lowlevel.checkpoint()
            if conn.dirty or conn.refreshing is not None:
                await self._sup.refresh(conn)
        return outcomes.from_result(result, external=conn.config is not None)

    async def _lost(
        self, conn: Connection, client: Client, exc: BaseException, name: str, annotations: mt.ToolAnnotations | None
    ) -> ToolOutcome:
        """The connection broke during a call: report it; the server is restarted (in the background or on demand).

        The request had been sent, so the call may have taken effect before the server died: the outcome is
        unknown, not merely "unavailable".
        """
        await self._sup.lost(conn, client, f"stopped answering: {describe(exc)}")
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
