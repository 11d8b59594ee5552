"""The supervisor: every MCP connection of a hub, its state, its health and its restarts.

Above it is the hub (:mod:`orchestrator.hub.pool`), which turns connections into namespaced tools and calls; below
it are the transports (:mod:`orchestrator.hub.transports`). Each connection lives in a task of the hub's task group.
An external server moves through ``starting``, ``ready``, ``degraded`` (a health check went unanswered), ``failed``
(it does not answer: restarted with backoff in the background) and ``stopped`` (the hub closed, or ``disabled``),
and every change is told to ``on_state`` with its reason (a stdio server's stderr tail included). Loom's built-in
in-process servers are supervised too, quietly: no state events (sessions open often), only :meth:`health`.

Health: an idle external connection is checked every ``healthInterval`` seconds, each check within
``healthTimeout``: ``ping`` on a handshake-era connection, a ``tools/list`` on a 2026-07-28 one (that revision
removed ping; the listing doubles as a check that the tools have not changed unannounced). A check that times out
makes the server ``degraded``; a second one, or any broken connection, makes it ``failed``.

List changes: a handshake-era server's ``notifications/*/list_changed`` arrive through the client's
``message_handler``; a 2026-07-28 server sends them only on a ``subscriptions/listen`` stream, which is held open
for each connection. Either way the connection's listings are fetched again by its watcher (never from inside the
SDK's receive loop) and the hub's tools are rebuilt, so the model's next request offers them.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskGroup
from mcp import Client, MCPError
from mcp import types as mt
from mcp.server.mcpserver import MCPServer
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from orchestrator.config import DEFAULT_STARTUP_TIMEOUT_S, ServerConfig
from orchestrator.events import ServerState
from orchestrator.hub.connection import Connection, FailureHook, ServerHealth, ServerUnavailableError, StateHook
from orchestrator.hub.outcomes import describe
from orchestrator.hub.schemas import share_output_validators
from orchestrator.hub.transports import connected_tools, list_all_tools, open_client, open_errlog, stderr_tail

if TYPE_CHECKING:
    from orchestrator.hub.client_caps import ClientHooks

__all__ = ["Connection", "FailureHook", "ServerHealth", "ServerUnavailableError", "StateHook", "Supervisor"]


class Supervisor:
    """Starts, watches, restarts and stops a hub's connections.

    Args:
        conns: The connections, by server name (shared with the hub, which reads ``client`` and ``tools``).
        tools_changed: Called (synchronously) whenever a connection's tools change, to rebuild the hub's tools.
    """

    def __init__(
        self,
        conns: Mapping[str, Connection],
        *,
        tools_changed: Callable[[], None],
        log_dir: Path | None,
        on_state: StateHook | None,
        on_failure: FailureHook | None,
        restart_backoff_s: Sequence[float],
        client_hooks: ClientHooks | None,
    ) -> None:
        self._conns = conns
        self._tools_changed = tools_changed
        self._log_dir = log_dir
        self._on_state = on_state
        self._on_failure = on_failure
        self._backoff = tuple(restart_backoff_s)
        self._hooks = client_hooks
        self._tg: TaskGroup | None = None
        self._watching = anyio.CancelScope()

    def start_watching(self, tg: TaskGroup) -> None:
        """Run a watcher for each external server, in ``tg`` (the hub's); built-in servers get none."""
        self._tg = tg
        watched = [c for c in self._conns.values() if c.config is not None and not c.config.disabled]
        if watched:
            tg.start_soon(self._watch_all, watched)

    async def _watch_all(self, conns: list[Connection]) -> None:
        with self._watching:
            async with anyio.create_task_group() as tg:
                for conn in conns:
                    tg.start_soon(self._watch, conn)

    async def close(self) -> None:
        """Stop watching and close every connection (each ``stopped``); the hub's task group then ends."""
        self._watching.cancel()
        live = [c for c in self._conns.values() if c.client is not None]
        for conn in self._conns.values():
            conn.stop.set()
            if conn.starting is not None:
                conn.starting.cancel()  # a start in progress must not hold the hub's exit for its whole timeout
        with anyio.CancelScope(shield=True), anyio.move_on_after(2):
            for conn in live:
                if conn.config is not None:
                    await self._set(conn, "stopped", "the session closed its connections")

    # -- states ------------------------------------------------------------------------------------

    def health(self, conn: Connection) -> ServerHealth:
        """``conn`` as :meth:`orchestrator.hub.pool.Hub.statuses` lists it."""
        cfg = conn.config
        return ServerHealth(
            name=conn.name,
            transport="in-process" if cfg is None else cfg.transport,
            state=conn.state,
            tools=len(conn.tools),
            last_error=conn.last_error,
            restarts=conn.restarts,
            latency_ms=conn.latency_ms,
            since=conn.since,
            stderr_tail=conn.errtail,
        )

    async def _set(self, conn: Connection, state: ServerState, reason: str) -> None:
        """Record a change of state and tell the hooks (external servers only); never raises.

        ``ready`` again is news (its tools changed); ``failed`` again only with another reason: a background restart
        that fails the same way is one event, not one per attempt.
        """
        previous = conn.last_error
        if state in ("failed", "degraded"):
            conn.last_error = reason
        if state == conn.state and (state not in ("ready", "failed") or (state == "failed" and reason == previous)):
            return
        conn.state, conn.since = state, time.time()
        if conn.config is None and state != "failed":
            return  # built-in servers: no events, sessions open often
        try:
            if self._on_state is not None and conn.config is not None:
                await self._on_state(self.health(conn), reason)
            if state == "failed" and self._on_failure is not None:
                await self._on_failure(conn.name, reason)
        except Exception:  # a hook that cannot record (a closing store) must not stop the supervisor
            pass

    def _schedule_restart(self, conn: Connection) -> None:
        conn.failures += 1
        conn.retry_at = anyio.current_time() + self._backoff[min(conn.failures, len(self._backoff)) - 1]

    # -- connections -------------------------------------------------------------------------------

    async def connect(self, conn: Connection) -> None:
        """Start ``conn``'s connection task and wait until it is ready or has failed."""
        assert self._tg is not None, "the hub is not open"
        if conn.generation:
            conn.restarts += 1
        elif conn.config is not None:
            await self._set(conn, "starting", "connecting")
        conn.stop = anyio.Event()
        conn.generation += 1
        conn.deferred = False
        ready = anyio.Event()
        self._tg.start_soon(self._serve, conn, conn.generation, ready)
        await ready.wait()
        if conn.client is not None:
            tail = f" after {conn.restarts} restart{'s' * (conn.restarts != 1)}" if conn.restarts else ""
            await self._set(conn, "ready", f"connected{tail}; {len(conn.tools)} tools")
        elif conn.error is not None:
            await self._set(conn, "failed", conn.error)

    async def _serve(self, conn: Connection, generation: int, ready: anyio.Event) -> None:
        """Own one connection for its whole life; never raises (failures are recorded on ``conn``)."""
        errlog_offset = 0
        error: str | None = None
        with contextlib.ExitStack() as files:
            errlog = open_errlog(conn.name, conn.target, self._log_dir, files)
            if errlog is not None:
                errlog_offset = errlog.tell()
            with anyio.CancelScope(deadline=anyio.current_time() + conn.startup_timeout_s) as scope:
                conn.starting = scope
                try:
                    if not isinstance(conn.target, MCPServer | ServerConfig):
                        conn.target = conn.target.build()  # its first call: the server is built now, once
                    options = self._options(conn)
                    async with open_client(conn.target, errlog, options) as client:
                        tools = await connected_tools(conn.target, client)
                        share_output_validators(client, tools)
                        scope.deadline = math.inf
                        conn.starting = None
                        conn.client, conn.tools, conn.error, conn.failures = client, tools, None, 0
                        conn.last_ok, conn.errtail = anyio.current_time(), ""
                        ready.set()
                        async with anyio.create_task_group() as inner:
                            if conn.config is not None and client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                                inner.start_soon(self._listen, conn, client)
                            await conn.stop.wait()
                            inner.cancel_scope.cancel()
                except Exception as exc:  # any failure of a server is reported, not raised
                    error = describe(exc)
            conn.starting = None
            if scope.cancelled_caught and not ready.is_set() and not conn.stop.is_set():
                error = f"did not start within {conn.startup_timeout_s:g}s"
            tail = stderr_tail(errlog, errlog_offset)
            if conn.generation != generation:
                return  # a newer connection owns ``conn`` now
            lost_here = conn.client is not None and not conn.stop.is_set()
            conn.client = None
            if error is not None:
                conn.error, conn.errtail = error + tail, tail.removeprefix("; its stderr ends with: ")
            elif lost_here:
                conn.error = "its connection ended"
            # A stop that was asked for (by ``lost`` after a call or a check saw the server die) already set the
            # restart time; counting the same death twice would push it back under a waiting retry.
            if conn.error is not None and not conn.stop.is_set():
                self._schedule_restart(conn)
                conn.poke()
            ready.set()
        if lost_here and conn.error is not None:
            await self._set(conn, "failed", conn.error)

    def _options(self, conn: Connection) -> dict[str, Any]:
        if conn.config is None:
            return {}
        options = dict(self._hooks.client_options(conn.name)) if self._hooks is not None else {}
        options["message_handler"] = self._message_handler(conn)  # the hub's own: list_changed and breakage
        return options

    def _message_handler(self, conn: Connection) -> Callable[[Any], Awaitable[None]]:
        async def handle(message: Any) -> None:
            # Called from the SDK's receive loop: only flag and wake, the watcher does the fetching.
            if isinstance(message, Exception):
                conn.check_now = True
                conn.poke()
            elif isinstance(
                message,
                mt.ToolListChangedNotification | mt.ResourceListChangedNotification | mt.PromptListChangedNotification,
            ):
                conn.dirty = True
                conn.poke()

        return handle

    async def _listen(self, conn: Connection, client: Client) -> None:
        """Hold a 2026-07-28 ``subscriptions/listen`` stream open: the only way such a server announces changes."""
        try:
            async with client.listen(
                tools_list_changed=True, prompts_list_changed=True, resources_list_changed=True
            ) as subscription:
                async for _event in subscription:
                    conn.dirty = True
                    conn.poke()
        except Exception:  # refused (no listen support) or broken: the health check decides which
            pass
        if not conn.stop.is_set():
            conn.check_now = True  # a stream that ends by itself often means the server went away
            conn.poke()

    async def revive(self, conn: Connection) -> None:
        """Restart a failed server if its backoff has passed (one restart at a time)."""
        async with conn.lock:
            if conn.client is not None or anyio.current_time() < conn.retry_at:
                return
            await self.connect(conn)
            if conn.client is not None:
                self._tools_changed()

    async def lost(self, conn: Connection, client: Client, reason: str) -> None:
        """``client`` broke or is wedged: mark the server failed and close it; its watcher restarts it."""
        if conn.client is not client:
            return  # already replaced by a restart
        conn.error = reason
        conn.client = None
        self._schedule_restart(conn)
        conn.stop.set()
        conn.poke()
        await self._set(conn, "failed", reason)

    # -- watching ----------------------------------------------------------------------------------

    async def _watch(self, conn: Connection) -> None:
        """Check ``conn`` while idle, refetch its listings when they change, restart it when it fails."""
        cfg = conn.config
        assert cfg is not None
        while True:
            wake = conn.wake
            if conn.client is None:
                delay = (
                    max(0.0, conn.retry_at - anyio.current_time()) if conn.error is not None else cfg.health_interval_s
                )
            elif conn.state == "degraded":
                delay = min(cfg.health_interval_s, cfg.health_timeout_s)  # confirm soon: wedged or just slow
            elif conn.busy:
                delay = cfg.health_interval_s  # a call in flight has its own deadline
            else:  # the interval counts from its last answer: a server in use is not pinged
                delay = max(0.01, conn.last_ok + cfg.health_interval_s - anyio.current_time())
            with anyio.move_on_after(delay):
                await wake.wait()
            if conn.wake is wake and wake.is_set():
                conn.wake = anyio.Event()
            client = conn.client
            if client is None:
                if conn.error is not None and anyio.current_time() >= conn.retry_at:
                    await self.revive(conn)
                continue
            if conn.dirty:
                conn.dirty = False
                await self.refresh(conn)
                continue
            idle_for = anyio.current_time() - conn.last_ok
            if conn.check_now or (conn.busy == 0 and (idle_for >= cfg.health_interval_s or conn.state == "degraded")):
                conn.check_now = False
                await self.check(conn, client)

    async def check(self, conn: Connection, client: Client, *, strict: bool = False) -> bool:
        """One health check of ``client``; True if it answered. ``strict``: a timeout fails it at once."""
        cfg = conn.config
        timeout = cfg.health_timeout_s if cfg is not None else DEFAULT_STARTUP_TIMEOUT_S
        started = anyio.current_time()
        listed: list[mt.Tool] | None = None
        try:
            with anyio.fail_after(timeout):
                if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                    listed = await list_all_tools(client, cache_mode="bypass")  # 2026-07-28 has no ping
                else:
                    await client.session.send_ping()
        except TimeoutError:
            why = f"did not answer a health check within {timeout:g}s"
            if strict or conn.state == "degraded":
                await self.lost(conn, client, why)
            else:
                await self._set(conn, "degraded", why)
            return False
        except MCPError as exc:
            if exc.code == mt.CONNECTION_CLOSED:
                await self.lost(conn, client, f"stopped answering: {describe(exc)}")
                return False
            # An error answer is an answer: a server that refuses ping (or the listing) is alive all the same.
        except Exception as exc:  # a broken connection, whatever the transport says
            await self.lost(conn, client, f"stopped answering: {describe(exc)}")
            return False
        conn.latency_ms = (anyio.current_time() - started) * 1000
        conn.last_ok = anyio.current_time()
        if conn.state == "degraded" and conn.client is client:
            await self._set(conn, "ready", "answers its health checks again")
        if listed is not None:  # a server that changed its tools without saying so is caught here too
            await self._announce(conn, client, listed)
        return True

    async def refresh(self, conn: Connection) -> None:
        """Fetch ``conn``'s tools again (and its resources and prompts, for the client's cache).

        A refresh already under way is waited for instead (and followed by another if a change came meanwhile).
        """
        while (running := conn.refreshing) is not None:
            await running.wait()
            if not conn.dirty:
                return
        conn.refreshing = done = anyio.Event()
        try:
            await self._refresh(conn)
        finally:
            conn.refreshing = None
            done.set()

    async def _refresh(self, conn: Connection) -> None:
        conn.dirty = False
        client = conn.client
        if client is None:
            return
        cfg = conn.config
        timeout = cfg.health_timeout_s if cfg is not None else DEFAULT_STARTUP_TIMEOUT_S
        try:
            with anyio.fail_after(timeout):
                listed = await list_all_tools(client, cache_mode="refresh")
        except TimeoutError:
            await self._set(conn, "degraded", f"did not list its tools within {timeout:g}s after announcing a change")
            return
        except MCPError:
            return  # answered, but not this listing: its tools stay as they were
        except Exception as exc:
            await self.lost(conn, client, f"stopped answering: {describe(exc)}")
            return
        conn.last_ok = anyio.current_time()
        await self._announce(conn, client, listed)
        caps = client.server_capabilities
        # Fetched again so the client's cache (what the resource and prompt tools read) holds the new lists.
        with contextlib.suppress(Exception), anyio.move_on_after(timeout):
            if caps.resources is not None:
                await client.list_resources(cache_mode="refresh")
            if caps.prompts is not None:
                await client.list_prompts(cache_mode="refresh")

    def _adopt(self, conn: Connection, client: Client, listed: list[mt.Tool]) -> bool:
        """Take a fresh listing; True if it changed what the hub offers."""
        if conn.client is not client or _same(conn.tools, listed):
            return False
        conn.tools = listed
        share_output_validators(client, listed)
        self._tools_changed()
        conn.dirty = False
        return True

    async def _announce(self, conn: Connection, client: Client, listed: list[mt.Tool]) -> None:
        if self._adopt(conn, client, listed) and conn.state == "ready":
            await self._set(conn, "ready", f"its tool list changed; {len(listed)} tools")


def _same(a: list[mt.Tool], b: list[mt.Tool]) -> bool:
    return [t.model_dump(exclude_none=True) for t in a] == [t.model_dump(exclude_none=True) for t in b]
