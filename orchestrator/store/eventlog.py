"""The event log: store first, then fan out to live subscribers.

Appends are serialised so that subscribers see events in ``seq`` order, and an event is published
only after the store has it: a client that reconnects from its last ``seq`` never misses one.
Live-only events (text deltas) skip the store. A subscriber that falls too far behind is dropped
(its stream ends) rather than slowing the run; it can re-read from the store by cursor.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from orchestrator.events import Event
from orchestrator.store.interface import Store

SUBSCRIBER_BUFFER = 10_000


class EventLog:
    """Durable append plus live publish for one runtime."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._lock = anyio.Lock()
        self._subscribers: list[MemoryObjectSendStream[Event]] = []
        self._stored = anyio.Event()

    async def append(self, *events: Event) -> None:
        """Store ``events`` in one batch, then publish them.

        Raises:
            orchestrator.store.interface.StoreError: nothing was stored or published.
        """
        # Shielded: a cancel landing mid-write must not leave an event stored but never published
        # (or the store's numbering out of step with the database). A write is short and bounded.
        with anyio.CancelScope(shield=True):
            async with self._lock:
                await self.store.append(events)
                self._publish(events)
                self._stored.set()
                self._stored = anyio.Event()

    async def wait_stored(self, timeout_s: float) -> None:
        """Return when the next batch is stored, or after ``timeout_s`` (for long-polling readers)."""
        with anyio.move_on_after(timeout_s):
            await self._stored.wait()

    def publish_live(self, event: Event) -> None:
        """Publish an event that is not stored (a text delta)."""
        self._publish((event,))

    def _publish(self, events: Sequence[Event]) -> None:
        if not self._subscribers:
            return
        dropped: list[MemoryObjectSendStream[Event]] = []
        for send in self._subscribers:
            try:
                for event in events:
                    send.send_nowait(event)
            except anyio.WouldBlock:
                dropped.append(send)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                dropped.append(send)
        for send in dropped:
            self._subscribers.remove(send)
            send.close()

    @contextlib.asynccontextmanager
    async def subscribe(self) -> AsyncIterator[MemoryObjectReceiveStream[Event]]:
        """Receive every event published while the context is open."""
        send, receive = anyio.create_memory_object_stream[Event](SUBSCRIBER_BUFFER)
        self._subscribers.append(send)
        try:
            with receive:
                yield receive
        finally:
            if send in self._subscribers:
                self._subscribers.remove(send)
            send.close()

    def close_subscribers(self) -> None:
        """End every subscription (their iteration finishes after the buffered events)."""
        for send in self._subscribers:
            send.close()
        self._subscribers.clear()
