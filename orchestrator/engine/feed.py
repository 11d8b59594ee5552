"""The feed between processes over a shared Postgres database: what another process stored or streamed.

On the DBOS engine the face (``loom serve``) did not write what it serves: a worker stored the run's events and
streamed its text. Two channels tell it:

- ``loom_events``: every append transaction of the Postgres store notifies ``'<session_id>:<last_seq>'`` per
  session it wrote, on commit. :class:`RemoteFeed` passes each to :meth:`EventLog.note_remote`, which brings what
  the log holds of that session up to date and wakes that session's readers, and no one else's.
- ``loom_live``: a worker's :class:`LivePublisher` sends each live event (text and tool-call deltas, tool
  progress) as its JSON; :class:`RemoteFeed` republishes it with :meth:`EventLog.receive_live` to the process's
  own followers.

The feed listens on one connection of its own. When it drops, reports may have been missed: the log forgets what it
cannot vouch for at once, the feed reconnects with backoff, and once it listens again every reader is woken to
read the store.
"""

from __future__ import annotations

import json
import logging
import weakref
from collections import deque
from collections.abc import Iterator
from types import TracebackType
from typing import Final, Self

import anyio
import psycopg
from anyio.abc import TaskGroup
from pydantic import ValidationError

from orchestrator.events import EVENT_ADAPTER, Event, TextDelta, ToolCallDelta, ToolProgress
from orchestrator.store.eventlog import LIVE_ONLY, EventLog
from servers.checkpoints._pg_errors import describe_pg, scrub

__all__ = [
    "EVENTS_CHANNEL",
    "LIVE_CHANNEL",
    "MAX_PAYLOAD_BYTES",
    "FeedError",
    "LivePublisher",
    "RemoteFeed",
    "live_payloads",
]

log = logging.getLogger(__name__)

EVENTS_CHANNEL: Final = "loom_events"
LIVE_CHANNEL: Final = "loom_live"
MAX_PAYLOAD_BYTES: Final = 7_000
"""The largest live payload sent: Postgres refuses a NOTIFY payload of 8,000 bytes or more."""
QUEUE_EVENTS: Final = 4_096
"""Live events a publisher holds while its connection is slow or down (see :meth:`LivePublisher.offer`)."""
BACKOFF_S: Final = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0)
"""Waits between reconnection attempts, the last repeated."""

_publisher_pids: weakref.WeakKeyDictionary[EventLog, set[int]] = weakref.WeakKeyDictionary()
"""By event log, the server pids of the publishers that log's live events go out through: not fed back to it."""


class FeedError(Exception):
    """The shared database could not be listened to or published on; the message says why and what to do."""


async def _connect(url: str, action: str) -> psycopg.AsyncConnection[tuple[object, ...]]:
    try:
        # TCP keepalives: a connection cut without a word (a network partition) is noticed in about 25 s, not hours.
        return await psycopg.AsyncConnection.connect(
            url,
            autocommit=True,
            connect_timeout=10,
            application_name="loom-feed",
            keepalives=1,
            keepalives_idle=10,
            keepalives_interval=5,
            keepalives_count=3,
        )
    except psycopg.Error as exc:
        raise FeedError(describe_pg(action, url, exc)) from None


async def _close(conn: psycopg.AsyncConnection[tuple[object, ...]]) -> None:
    # Shielded and bounded: closing as the feed is cancelled must still happen (a cancelled close leaves the
    # connection open until the collector finds it), and a dead server must not hold the face's exit.
    with anyio.CancelScope(shield=True), anyio.move_on_after(2):
        await conn.close()


def _backoff() -> Iterator[float]:
    yield from BACKOFF_S
    while True:
        yield BACKOFF_S[-1]


class RemoteFeed:
    """Feeds ``log`` what other processes store and stream on the database at ``url``, while the context is open.

    Raises at enter:
        FeedError: the database cannot be reached (the URL is shown with its password masked).
    """

    def __init__(self, url: str, log: EventLog) -> None:
        self.url = url
        self.log = log
        self.connected = anyio.Event()
        """Set once listening; a new one replaces it after each reconnection (for tests and status)."""
        self.reconnects = 0
        """How many times the connection was lost and listened on again."""
        self._tg: TaskGroup | None = None

    async def __aenter__(self) -> Self:
        conn = await self._listen(await _connect(self.url, "cannot listen for events on"))
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._run, conn)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        assert self._tg is not None
        self._tg.cancel_scope.cancel()
        return await self._tg.__aexit__(exc_type, exc, tb)

    async def _listen(
        self, conn: psycopg.AsyncConnection[tuple[object, ...]]
    ) -> psycopg.AsyncConnection[tuple[object, ...]]:
        try:
            await conn.execute(f"LISTEN {EVENTS_CHANNEL}")
            await conn.execute(f"LISTEN {LIVE_CHANNEL}")
        except BaseException:
            await conn.close()
            raise
        self.connected.set()
        return conn

    async def _run(self, conn: psycopg.AsyncConnection[tuple[object, ...]]) -> None:
        while True:
            try:
                async for note in conn.notifies():
                    await self._take(note.channel, note.payload, note.pid)
            except psycopg.Error as exc:
                log.warning("%s; reconnecting", describe_pg("lost the feed from", self.url, exc))
            finally:
                await _close(conn)
            # Reports may have been missed: memory stops vouching now, and readers catch up once listening again.
            self.log.note_remote_gap()
            self.connected = anyio.Event()
            conn = await self._reconnect()
            self.reconnects += 1
            self.log.note_remote_gap()

    async def _reconnect(self) -> psycopg.AsyncConnection[tuple[object, ...]]:
        for wait in _backoff():
            await anyio.sleep(wait)
            try:
                return await self._listen(await _connect(self.url, "cannot listen for events on"))
            except (FeedError, psycopg.Error) as exc:
                log.debug("feed reconnection failed: %s", scrub(str(exc), self.url))
        raise AssertionError("unreachable")  # _backoff never ends

    async def _take(self, channel: str, payload: str, pid: int) -> None:
        if channel == EVENTS_CHANNEL:
            session_id, _, seq = payload.rpartition(":")
            if session_id and seq.isdigit():
                await self.log.note_remote(session_id, int(seq))
            else:
                log.warning("ignored a %s notification that is not SESSION:SEQ: %.80r", channel, payload)
            return
        if pid in _publisher_pids.get(self.log, ()):
            return  # this log published it already, before sending it out
        try:
            event = EVENT_ADAPTER.validate_json(payload)
        except ValidationError:
            log.warning("ignored a %s notification that is not a live event: %.80r", channel, payload)
            return
        if event.type in LIVE_ONLY:
            self.log.receive_live(event)


def _fits(event: Event) -> str | None:
    payload = event.model_dump_json()
    return payload if len(payload.encode("utf-8", "surrogatepass")) <= MAX_PAYLOAD_BYTES else None


def _json_size(char: str) -> int:
    if " " <= char < "\x7f" and char not in '"\\':
        return 1
    return len(json.dumps(char, ensure_ascii=False).encode("utf-8", "surrogatepass")) - 2


def _cut(text: str, budget: int) -> list[str]:
    """``text`` in pieces whose JSON-escaped size is at most ``budget`` bytes each."""
    pieces: list[str] = []
    start, size = 0, 0
    for i, char in enumerate(text):
        cost = _json_size(char)
        if size + cost > budget and i > start:
            pieces.append(text[start:i])
            start, size = i, 0
        size += cost
    pieces.append(text[start:])
    return pieces


def live_payloads(event: Event) -> list[str]:
    """``event``'s JSON for ``loom_live``, as several events when it would pass :data:`MAX_PAYLOAD_BYTES`.

    A text delta is split into deltas of consecutive text (a tool-call delta, of consecutive arguments), which
    the receiving log joins back; an oversized progress report loses the end of its message.
    """
    whole = _fits(event)
    if whole is not None:
        return [whole]
    if isinstance(event, TextDelta):
        budget = MAX_PAYLOAD_BYTES - len(event.model_copy(update={"text": ""}).model_dump_json().encode()) - 16
        return [event.model_copy(update={"text": piece}).model_dump_json() for piece in _cut(event.text, budget)]
    if isinstance(event, ToolCallDelta):
        empty = event.model_copy(update={"arguments": ""})
        budget = MAX_PAYLOAD_BYTES - len(empty.model_dump_json().encode()) - 16
        pieces = _cut(event.arguments, budget)
        # The call's id and name ride on the first piece only; the receiver keeps them.
        rest = event.model_copy(update={"call_id": "", "name": ""})
        return [
            (event if i == 0 else rest).model_copy(update={"arguments": piece}).model_dump_json()
            for i, piece in enumerate(pieces)
        ]
    if isinstance(event, ToolProgress):
        budget = MAX_PAYLOAD_BYTES - len(event.model_copy(update={"message": ""}).model_dump_json().encode()) - 16
        return [event.model_copy(update={"message": _cut(event.message, budget)[0]}).model_dump_json()]
    return []


class LivePublisher:
    """Sends ``log``'s live events to ``loom_live`` on the database at ``url``, while the context is open.

    It becomes the log's :attr:`~EventLog.live_sink`: :meth:`offer` only queues, and a task of its own sends.

    Raises at enter:
        FeedError: the database cannot be reached (the URL is shown with its password masked).
    """

    def __init__(self, url: str, log: EventLog) -> None:
        self.url = url
        self.log = log
        self.dropped = 0
        """Live events dropped because the queue was full (see :meth:`offer`)."""
        self._queue: deque[Event] = deque()
        self._ready = anyio.Event()
        self._flushed: anyio.Event | None = None
        """Set when the queue is empty and sent, for a closing publisher."""
        self._tg: TaskGroup | None = None
        self._pid = 0

    async def __aenter__(self) -> Self:
        conn = await _connect(self.url, "cannot publish live events on")
        self._own(conn)
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._run, conn)
        self.log.live_sink = self.offer
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        assert self._tg is not None
        if self.log.live_sink == self.offer:
            self.log.live_sink = None
        try:
            if self._queue:
                self._flushed = anyio.Event()
                with anyio.move_on_after(1.0):  # what is queued goes out, if the database takes it soon
                    await self._flushed.wait()
            self._tg.cancel_scope.cancel()
            return await self._tg.__aexit__(exc_type, exc, tb)
        finally:
            _publisher_pids.get(self.log, set()).discard(self._pid)  # a later connection may be given this pid

    def offer(self, event: Event) -> None:
        """Queue ``event`` to be sent; never blocks the caller (the run's loop).

        When the queue is full (the database is slow or unreachable), the oldest text delta queued is dropped to
        make room, or else the oldest event: followers on other processes then miss that piece of live text until
        the stored message holds all of it, which is better than a run that waits on its followers' database.
        """
        queue = self._queue
        if len(queue) >= QUEUE_EVENTS:
            self.dropped += 1
            for i, queued in enumerate(queue):
                if isinstance(queued, TextDelta):
                    del queue[i]
                    break
            else:
                queue.popleft()
        queue.append(event)
        self._ready.set()

    def _own(self, conn: psycopg.AsyncConnection[tuple[object, ...]]) -> None:
        pids = _publisher_pids.setdefault(self.log, set())
        pids.discard(self._pid)
        self._pid = conn.info.backend_pid
        pids.add(self._pid)

    async def _run(self, conn: psycopg.AsyncConnection[tuple[object, ...]]) -> None:
        while True:
            try:
                await self._send(conn)
            except psycopg.Error as exc:
                log.warning("%s; reconnecting", describe_pg("lost live publishing to", self.url, exc))
            finally:
                await _close(conn)
            for wait in _backoff():
                await anyio.sleep(wait)
                try:
                    conn = await _connect(self.url, "cannot publish live events on")
                except FeedError as exc:
                    log.debug("live publisher reconnection failed: %s", exc)
                    continue
                self._own(conn)
                break

    async def _send(self, conn: psycopg.AsyncConnection[tuple[object, ...]]) -> None:
        while True:
            await self._ready.wait()
            self._ready = anyio.Event()
            while self._queue:
                # Taken off first: a send that fails is not repeated (a gap in live text, never the same piece twice).
                event = self._queue.popleft()
                # One statement each, in autocommit: Postgres folds identical payloads sent in one transaction.
                for payload in live_payloads(event):
                    await conn.execute("SELECT pg_notify(%s, %s)", (LIVE_CHANNEL, payload))
            if self._flushed is not None:
                self._flushed.set()
