"""Subscriptions to a session's resources: an update notification when its stored events change.

Handshake eras (2025-11-25 and before): ``resources/subscribe`` / ``resources/unsubscribe`` with a
``notifications/resources/updated`` on the connection's standalone stream. 2026-07-28: ``subscriptions/listen``
naming the URIs in ``resourceSubscriptions``; the SDK's listen handler serves the stream and this module publishes
``ResourceUpdated`` events on the face's bus for the URIs some stream asked for.

Nothing runs for a session nobody subscribed to: one watcher task per subscribed session, started with the first
subscription and cancelled with the last, waits on the event log for that session's stored batches alone
(:meth:`~orchestrator.store.eventlog.EventLog.wait_stored`) and sends at most one notification per URI every
:data:`COALESCE_S` (a burst of events is one notification; the client reads the resource again anyway). Watchers
run in the face's lifespan task group (:class:`Watches`, one per lifespan: once per daemon over HTTP, once per
connection in process or over stdio).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
from anyio.abc import TaskGroup, TaskStatus
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.subscriptions import ResourceUpdated, SubscriptionBus
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, EmptyResult, SubscribeRequestParams, UnsubscribeRequestParams
from mcp_types import SubscriptionsListenRequestParams
from pydantic import ValidationError

from orchestrator.face.input import lone_surrogate
from orchestrator.face.resources import session_of
from orchestrator.runtime.host import HostError, SessionHost
from orchestrator.store.eventlog import EventLog

__all__ = ["COALESCE_S", "MAX_LISTENED", "WATCHES_KEY", "ListenInterest", "Watches", "subscribe_handlers"]

COALESCE_S: Final = 0.25
"""The least time between two update notifications of one session's resources."""
SEND_TIMEOUT_S: Final = 5.0
"""How long one notification may take to be written: a client that stopped reading is dropped."""
MAX_LISTENED: Final = 100
"""The most session resources one ``subscriptions/listen`` stream may name."""
WATCHES_KEY: Final = "loom.watches"
"""Where the lifespan context holds its :class:`Watches`."""


@dataclass
class _Wanted:
    """Who wants one URI's updates: handshake-era connections (by connection) and listen streams (a count)."""

    legacy: dict[object, ServerSession] = field(default_factory=dict)
    listens: int = 0


class Watches:
    """The subscriptions of one face lifespan, and the watcher tasks they keep running."""

    def __init__(self, log: EventLog, bus: SubscriptionBus, tg: TaskGroup) -> None:
        self._log = log
        self._bus = bus
        self._tg = tg
        self._wanted: dict[str, _Wanted] = {}
        self._by_session: dict[str, set[str]] = {}
        self._watchers: dict[str, anyio.CancelScope] = {}
        self._closing: set[object] = set()
        """Connections whose teardown already drops their subscriptions."""

    @property
    def watched(self) -> frozenset[str]:
        """The sessions a watcher follows now."""
        return frozenset(self._watchers)

    async def add(self, uri: str, holder: ServerSession | None) -> None:
        """Want ``uri``'s updates: for a handshake-era connection (``holder``), or a listen stream (None)."""
        session_id = session_of(uri)
        assert session_id is not None
        wanted = self._wanted.setdefault(uri, _Wanted())
        if holder is None:
            wanted.listens += 1
        else:
            key = _connection(holder)
            wanted.legacy[key] = holder
            self._drop_at_close(key)
        self._by_session.setdefault(session_id, set()).add(uri)
        if session_id not in self._watchers:
            self._watchers[session_id] = await self._tg.start(self._watch, session_id)

    def remove(self, uri: str, holder: ServerSession | None) -> None:
        """No longer want ``uri``'s updates (the watcher stops with the session's last subscription)."""
        wanted = self._wanted.get(uri)
        if wanted is None:
            return
        if holder is None:
            wanted.listens = max(0, wanted.listens - 1)
        else:
            wanted.legacy.pop(_connection(holder), None)
        if not wanted.legacy and not wanted.listens:
            self._forget(uri)

    def drop_connection(self, key: object) -> None:
        """Forget every subscription of a closed connection."""
        self._closing.discard(key)
        for uri, wanted in list(self._wanted.items()):
            if wanted.legacy.pop(key, None) is not None and not wanted.legacy and not wanted.listens:
                self._forget(uri)

    def _forget(self, uri: str) -> None:
        del self._wanted[uri]
        session_id = session_of(uri)
        assert session_id is not None
        uris = self._by_session.get(session_id, set())
        uris.discard(uri)
        if not uris:
            self._by_session.pop(session_id, None)
            scope = self._watchers.pop(session_id, None)
            if scope is not None:
                scope.cancel()

    def _drop_at_close(self, key: object) -> None:
        exit_stack = getattr(key, "exit_stack", None)
        if key in self._closing or exit_stack is None:
            return
        self._closing.add(key)
        exit_stack.callback(self.drop_connection, key)

    async def _watch(self, session_id: str, *, task_status: TaskStatus[anyio.CancelScope]) -> None:
        with anyio.CancelScope() as scope:
            changed = False
            task_status.started(scope)
            while True:
                # Registered before this task first yields: a batch stored after `add` returned wakes it.
                if not changed:
                    await self._log.wait_stored(session_id, math.inf)
                marker = self._log.newest_held(session_id)
                await self._notify(session_id)
                await anyio.sleep(COALESCE_S)
                changed = self._log.newest_held(session_id) != marker

    async def _notify(self, session_id: str) -> None:
        for uri in sorted(self._by_session.get(session_id, ())):
            wanted = self._wanted.get(uri)
            if wanted is None:
                continue
            if wanted.listens:
                await self._bus.publish(ResourceUpdated(uri=uri))
            for key, holder in list(wanted.legacy.items()):
                delivered = False
                with anyio.move_on_after(SEND_TIMEOUT_S):
                    try:
                        await holder.send_resource_updated(uri)
                        delivered = True
                    except Exception:  # a closed connection: it has stopped listening
                        pass
                if not delivered:
                    self.drop_connection(key)


def _connection(session: ServerSession) -> object:
    # The request's session is a per-request proxy; its connection is what lasts from subscribe to unsubscribe.
    return getattr(session, "_connection", None) or session


def _watches(ctx: ServerRequestContext[Any, Any]) -> Watches:
    watches = ctx.lifespan_context.get(WATCHES_KEY) if isinstance(ctx.lifespan_context, Mapping) else None
    if not isinstance(watches, Watches):
        raise MCPError(code=INVALID_PARAMS, message="this Loom face serves no subscriptions (it was not started)")
    return watches


def subscribe_handlers(host: SessionHost) -> tuple[Any, Any]:
    """The ``resources/subscribe`` and ``resources/unsubscribe`` handlers (handshake eras) over ``host``."""

    async def subscribe(ctx: ServerRequestContext[Any, Any], params: SubscribeRequestParams) -> EmptyResult:
        uri = str(params.uri)
        session_id = _subscribable(uri)
        if lone_surrogate(session_id):
            raise MCPError(code=INVALID_PARAMS, message="the URI holds a lone surrogate, which is not text")
        try:
            await host.record(session_id)
        except HostError as exc:
            raise MCPError(code=INVALID_PARAMS, message=str(exc), data={"uri": uri}) from exc
        await _watches(ctx).add(uri, ctx.session)
        return EmptyResult()

    async def unsubscribe(ctx: ServerRequestContext[Any, Any], params: UnsubscribeRequestParams) -> EmptyResult:
        uri = str(params.uri)
        _subscribable(uri)
        _watches(ctx).remove(uri, ctx.session)
        return EmptyResult()

    return subscribe, unsubscribe


def _subscribable(uri: str) -> str:
    session_id = session_of(uri)
    if session_id is None:
        raise MCPError(
            code=INVALID_PARAMS,
            message=(
                f"{uri!r} cannot be subscribed to; subscribe to a session's loom://sessions/ID/state or "
                "loom://sessions/ID/transcript"
            ),
            data={"uri": uri},
        )
    return session_id


class ListenInterest:
    """Server middleware: a ``subscriptions/listen`` stream naming session URIs keeps their watchers running.

    A URI of a session that does not exist is acknowledged and never fires (as the SDK treats any unknown URI), and
    no watcher is started for it; a stream may name at most :data:`MAX_LISTENED` session URIs.
    """

    leaves_tool_listing = True
    """Tool listings pass through untouched (hub/transports.py reuses them)."""

    def __init__(self, host: SessionHost) -> None:
        self.host = host

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """Pass the request on; around a listen stream, want the session URIs it names."""
        if ctx.method != "subscriptions/listen":
            return await call_next(ctx)
        try:
            params = SubscriptionsListenRequestParams.model_validate(ctx.params or {})
        except ValidationError:
            return await call_next(ctx)  # the SDK refuses it, in its words
        named = [u for u in params.notifications.resource_subscriptions or () if session_of(u) is not None]
        watches = ctx.lifespan_context.get(WATCHES_KEY) if isinstance(ctx.lifespan_context, Mapping) else None
        if not named or not isinstance(watches, Watches):
            return await call_next(ctx)
        if len(named) > MAX_LISTENED:
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"{len(named)} session resources named; one listen stream follows at most {MAX_LISTENED}",
            )
        uris = [uri for uri in dict.fromkeys(named) if await self._exists(uri)]
        for uri in uris:
            await watches.add(uri, None)
        try:
            return await call_next(ctx)
        finally:
            for uri in uris:
                watches.remove(uri, None)

    async def _exists(self, uri: str) -> bool:
        session_id = session_of(uri)
        if session_id is None or lone_surrogate(session_id):
            return False
        try:
            await self.host.record(session_id)
        except HostError:
            return False
        return True
