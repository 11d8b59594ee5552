"""Resumable SSE streams for 2025-era clients: event ids on every message, a bounded replay, one session's only.

The 2025 revisions of streamable HTTP let a client whose SSE stream (a POST's response, or the GET stream) broke
reconnect with ``GET`` and ``Last-Event-ID`` and receive what it missed; 2026-07-28 dropped resumability (its
requests are single exchanges, and the SDK never stores their messages). The SDK's ``StreamableHTTPSessionManager``
offers the seam, an :class:`~mcp.server.streamable_http.EventStore`, but shares one store between all sessions and
names streams by JSON-RPC request id, which every client starts from 0: two sessions' request ``1`` are the same
"stream" to it. So this store keeps one set of streams per session:

- :class:`SessionScope` (an ASGI wrapper in front of the MCP app) puts the session's key in a context variable
  for each request. The opening request's key is fresh; the SDK starts the session's message router from within
  that request, so the router (which stores most events) inherits it; later requests find it again by their
  ``Mcp-Session-Id``.
- A replay only ever reads the requesting session's events; an event id that is unknown, evicted or another
  session's is answered 400 with the reason (an empty stream would have the client reconnect forever).

Bounded: at most ``per_stream`` events per stream, ``streams_per_session`` streams per session (the oldest stream
goes first) and ``total`` events in all; a session's events go with it when it ends (its key is held only by the
session's tasks). Memory use is therefore capped however many messages a session sends and nobody reads.
"""

from __future__ import annotations

import contextvars
import itertools
import json
import logging
import weakref
from collections import OrderedDict, deque
from dataclasses import dataclass, field

from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp.types import JSONRPCMessage
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["BoundedEventStore", "SessionScope"]

logger = logging.getLogger(__name__)

PER_STREAM = 512
STREAMS_PER_SESSION = 64
TOTAL = 20_000


class _SessionKey:
    """Identity of one MCP session's streams (weakly referenced: its events live as long as its tasks)."""

    __slots__ = ("__weakref__",)


_current: contextvars.ContextVar[_SessionKey | None] = contextvars.ContextVar("loom_sse_session", default=None)


@dataclass
class _Streams:
    """One session's streams, oldest first, each a deque of ``(event number, message or None for priming)``."""

    by_id: OrderedDict[StreamId, deque[tuple[int, JSONRPCMessage | None]]] = field(default_factory=OrderedDict)


class BoundedEventStore(EventStore):
    """The SDK's event store, per session and bounded (see the module docstring)."""

    def __init__(self, *, per_stream: int = PER_STREAM, streams_per_session: int = STREAMS_PER_SESSION,
                 total: int = TOTAL) -> None:  # fmt: skip
        if min(per_stream, streams_per_session, total) < 1:
            raise ValueError("event store limits must be positive")
        self._per_stream = per_stream
        self._streams_per_session = streams_per_session
        self._total = total
        self._numbers = itertools.count(1)
        self._sessions: weakref.WeakKeyDictionary[_SessionKey, _Streams] = weakref.WeakKeyDictionary()
        # Every stored event by number, oldest first: what the global cap evicts. Entries of ended sessions
        # (dead references) or of streams already dropped are skipped when they come up.
        self._order: deque[tuple[int, weakref.ref[_SessionKey], StreamId]] = deque()
        self._held = 0

    @property
    def held(self) -> int:
        """How many events are stored now (ended sessions' excepted once collected)."""
        return sum(len(stream) for streams in self._sessions.values() for stream in streams.by_id.values())

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        """Store ``message`` (None: a priming event) on the current session's ``stream_id``; its event id."""
        number = next(self._numbers)
        key = _current.get()
        if key is None:  # not under SessionScope (a test app without it): give ids, keep nothing
            return str(number)
        streams = self._sessions.setdefault(key, _Streams())
        stream = streams.by_id.get(stream_id)
        if stream is None:
            stream = streams.by_id[stream_id] = deque()
            while len(streams.by_id) > self._streams_per_session:
                _, dropped = streams.by_id.popitem(last=False)
                self._held -= len(dropped)
        if len(stream) >= self._per_stream:
            stream.popleft()
            self._held -= 1
        stream.append((number, message))
        self._held += 1
        self._order.append((number, weakref.ref(key), stream_id))
        self._evict()
        return str(number)

    def _evict(self) -> None:
        while self._order and (self._held > self._total or len(self._order) > 2 * self._total):
            number, ref, stream_id = self._order.popleft()
            key = ref()
            streams = self._sessions.get(key) if key is not None else None
            stream = streams.by_id.get(stream_id) if streams is not None else None
            if stream and stream[0][0] == number:
                stream.popleft()
                self._held -= 1

    def _locate(self, last_event_id: EventId) -> tuple[StreamId, deque[tuple[int, JSONRPCMessage | None]]] | None:
        key = _current.get()
        streams = self._sessions.get(key) if key is not None else None
        if streams is None or not last_event_id.isdigit():
            return None
        number = int(last_event_id)
        for stream_id, stream in streams.by_id.items():
            if stream and stream[0][0] <= number <= stream[-1][0] and any(n == number for n, _ in stream):
                return stream_id, stream
        return None

    def can_resume(self, last_event_id: EventId) -> bool:
        """Whether the current session still holds the event ``last_event_id``."""
        return self._locate(last_event_id) is not None

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        """Send the current session's events after ``last_event_id`` on its stream; that stream's id."""
        found = self._locate(last_event_id)
        if found is None:
            return None
        stream_id, stream = found
        number = int(last_event_id)
        for n, message in list(stream):
            if n > number and message is not None:
                await send_callback(EventMessage(message, str(n)))
        return stream_id


class SessionScope:
    """Bind each request to its MCP session's streams in the store, and refuse a resume it cannot serve.

    Args:
        app: The MCP app (the SDK's session manager).
        store: The store the session manager was given.
    """

    def __init__(self, app: ASGIApp, store: BoundedEventStore) -> None:
        self.app = app
        self._store = store
        self._keys: weakref.WeakValueDictionary[str, _SessionKey] = weakref.WeakValueDictionary()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one request with its session's key set."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers", ()))
        session_id = headers.get(b"mcp-session-id", b"").decode("latin-1")
        key = self._keys.get(session_id) if session_id else None
        if key is None:
            # A request opening a session (or naming an unknown one, which the SDK answers 404).
            key = _SessionKey()
        token = _current.set(key)
        try:
            last = headers.get(b"last-event-id")
            if scope.get("method") == "GET" and last is not None and session_id in self._keys:
                if not self._store.can_resume(last.decode("latin-1")):
                    await _cannot_resume(send)
                    return

            async def remember(message: Message) -> None:
                if message["type"] == "http.response.start" and not session_id:
                    for name, value in message.get("headers", ()):
                        if name.lower() == b"mcp-session-id":
                            self._keys[value.decode("latin-1")] = key
                await send(message)

            await self.app(scope, receive, remember)
        finally:
            _current.reset(token)


async def _cannot_resume(send: Send) -> None:
    message = (
        "cannot resume from that Last-Event-ID: this session no longer holds it (the daemon keeps the last "
        f"{PER_STREAM} events of a stream, and none of another session's); send the request again"
    )
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 400, "headers": headers})
    await send({"type": "http.response.body", "body": body})
