"""The event log: store first, then fan out to live subscribers.

Appends are serialised in rounds, so that subscribers see events in ``seq`` order: the batches appended
while one round is being stored make the next, a single store call (see :meth:`EventLog.append`). An
event is published only after the store has it: a client that reconnects from its last ``seq`` never
misses one.
Live-only events (text deltas) skip the store. A subscriber that falls too far behind is dropped
(its stream ends) rather than slowing the run; it can re-read from the store by cursor.

The log also keeps, per session, the model step in flight: the text (and tool-call arguments) streamed
since that attempt of the step began (:meth:`EventLog.live`). A follower that arrives or reconnects in
the middle of a message reads it there, then the rest as it comes. The partial is dropped as soon as a
stored event holds its text (the run's ``assistant_message``), or the attempt is given up (``model_retry``,
``run_finished``), so it never repeats what the store has.

Readers wait per session (:meth:`EventLog.watch`, :meth:`EventLog.wait_stored`): a batch stored in one
session wakes only that session's readers. And the log keeps, per session it wrote to lately, the newest
stored events in memory (:meth:`EventLog.stored_since`), so that a follower a few events behind is served
without a round trip to the store. That tail is exact because every append of this process goes through
the log, in ``seq`` order, one round at a time: it holds every event from its first ``seq`` to the newest, and
it is dropped whenever that cannot be vouched for (a numbering gap, a failed append). Memory only says
"nothing newer" while a run of this process is writing the session; otherwise the store is asked.

Over a shared database, other processes write too (a worker runs the session's steps, the face serves it), and
a feed (orchestrator/engine/feed.py) tells this log what they did: :meth:`EventLog.note_remote` when one stored
events of a session (the tail held for it is brought up to date from the store, or dropped, and its readers
woken), :meth:`EventLog.receive_live` for their live events, and :meth:`EventLog.note_remote_gap` when the feed
may have missed some. The other way, :attr:`EventLog.live_sink` hands this process's live events to a publisher.
While a feed is connected, what it reports keeps memory exact, so a tail it filled vouches for "nothing newer"
as a local run's does.
"""

from __future__ import annotations

import contextlib
import itertools
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from orchestrator.events import (
    AssistantMessage,
    Event,
    ModelRetry,
    RunFinished,
    SessionArchived,
    TextDelta,
    ToolCallDelta,
    ToolCallFinished,
    ToolProgress,
)
from orchestrator.store.interface import Store, StoreError

SUBSCRIBER_BUFFER = 10_000
LIVE_ONLY = frozenset({"text_delta", "tool_call_delta", "tool_progress"})
"""Event types that are published but never stored."""
TAIL_EVENTS = 128
"""Stored events kept in memory per session: a follower further behind reads the store."""
IDLE_TAILS = 64
"""Tails kept for sessions without a run in progress (most recently written first); those with one are all kept."""
REMOTE_FLOORS = 4096
"""Sessions whose newest seq stored by another process is remembered without holding their events."""
_ROUND_BATCHES = 256
"""Batches stored in one round at most: one store call's payload stays bounded however many sessions wait."""


@dataclass(frozen=True, slots=True)
class LiveToolCall:
    """A tool call of the step in flight, as far as the model has streamed it."""

    index: int
    call_id: str
    name: str
    arguments: str
    """The arguments' JSON text so far (incomplete until the call is)."""


@dataclass(frozen=True, slots=True)
class LiveStep:
    """A session's model step in flight: what it has streamed that no stored event holds yet."""

    run_id: str
    step: int
    after_seq: int
    """The session's newest stored ``seq`` when this attempt began streaming; with ``run_id`` and ``step`` it
    names the attempt (a retried model call streams again, from nothing, under a new ``after_seq``)."""
    text: str
    tool_calls: tuple[LiveToolCall, ...]


@dataclass(slots=True)
class _Partial:
    run_id: str
    step: int
    after_seq: int
    text: str = ""
    calls: dict[int, list[str]] = field(default_factory=dict[int, list[str]])
    """index -> [call_id, name, arguments so far]"""

    def snapshot(self) -> LiveStep:
        calls = tuple(LiveToolCall(i, c[0], c[1], c[2]) for i, c in sorted(self.calls.items()))
        return LiveStep(self.run_id, self.step, self.after_seq, self.text, calls)


@dataclass(slots=True)
class _Tail:
    """A session's newest stored events, each with its seq: every event with ``base < seq <= newest``."""

    base: int
    events: deque[Event] = field(default_factory=deque[Event])
    active: bool = True
    """A run of this process is writing the session, so nothing newer than ``newest`` is stored elsewhere."""

    @property
    def newest(self) -> int:
        return self.base + len(self.events)

    def add(self, event: Event, seq: int) -> None:
        if seq != self.newest + 1:  # something was stored past this log (another writer): start again from here
            self.events.clear()
            self.base = seq - 1
        self.events.append(event)
        if len(self.events) > TAIL_EVENTS:
            self.events.popleft()
            self.base += 1


@dataclass(eq=False, slots=True)
class _Batch:
    """One caller's events, waiting to be stored in a round."""

    events: tuple[Event, ...]
    done: bool = False
    error: BaseException | None = None


class EventLog:
    """Durable append plus live publish for one runtime."""

    def __init__(self, store: Store, *, live_sink: Callable[[Event], None] | None = None) -> None:
        self.store = store
        self.live_sink = live_sink
        """Also given every live event published here (not those received from other processes): a worker's
        publisher, which must not block (see orchestrator/engine/feed.py)."""
        self._queue: list[_Batch] = []
        """Batches waiting for the next round (see :meth:`append`), oldest first."""
        self._flushing: anyio.Event | None = None
        """Set when the round being stored ends; None while no round is."""
        self._subscribers: list[MemoryObjectSendStream[Event]] = []
        self._partials: dict[str, _Partial] = {}
        self._progress: dict[str, dict[str, ToolProgress]] = {}
        """By session, the latest progress report of each tool call in flight (by call id): live only."""
        self._tails: dict[str, _Tail] = {}
        self._idle: OrderedDict[str, None] = OrderedDict()
        """Sessions whose tail is kept without a run in progress, least recently written first."""
        self._watches: dict[str, anyio.Event] = {}
        self._stored_watches: dict[str, anyio.Event] = {}
        self._floors: OrderedDict[str, int] = OrderedDict()
        """The newest seq another process stored, for sessions whose events are not held (least recent first)."""
        self._lost: dict[str, tuple[str, int]] = {}
        """The step in flight of a session whose live text was dropped at a gap in the feed (run id, step)."""

    async def append(self, *events: Event) -> None:
        """Store ``events`` in one batch, then publish them.

        Batches appended while another is being stored (other sessions' runs, as a busy daemon has) are stored
        together in the next round, one store call and one transaction for all of them (see :meth:`_flush`); each
        caller still returns only once its own events are stored and published, or raises for its own batch.

        Raises:
            orchestrator.store.interface.StoreError: nothing was stored or published.
            ValueError: a live-only event was given.
        """
        if any(event.type in LIVE_ONLY for event in events):
            raise ValueError("live-only events are not stored")
        # Shielded: a cancel landing mid-write must not leave an event stored but never published
        # (or the store's numbering out of step with the database). A write is short and bounded.
        with anyio.CancelScope(shield=True):
            batch = _Batch(events)
            self._queue.append(batch)
            while not batch.done:
                if self._flushing is None:
                    await self._flush()
                else:  # a round is being stored; this batch goes in the next one
                    await self._flushing.wait()
            if batch.error is not None:
                raise batch.error

    async def _flush(self) -> None:
        """Store and publish every batch queued so far: one round, in queue order."""
        round_over = self._flushing = anyio.Event()
        batches, self._queue = self._queue[:_ROUND_BATCHES], self._queue[_ROUND_BATCHES:]
        try:
            try:
                await self.store.append([event for batch in batches for event in batch.events])
            except BaseException as exc:
                if len(batches) == 1 or not isinstance(exc, Exception):
                    raise
                # One batch may be what the store refuses (and nothing of the round is stored): the others must
                # not fail with it, so each is stored again on its own and answers for itself.
                for batch in batches:
                    try:
                        await self.store.append(batch.events)
                    except Exception as own:
                        self._forget(batch, own)
                    else:
                        self._note_stored(batch.events)
                        self._publish(batch.events)
                    batch.done = True
                return
            events = [event for batch in batches for event in batch.events]
            self._note_stored(events)
            self._publish(events)
            for batch in batches:
                batch.done = True
        except BaseException as exc:
            for batch in batches:
                if not batch.done:
                    self._forget(batch, exc)
            if not isinstance(exc, Exception):
                raise
        finally:
            self._flushing = None
            round_over.set()

    def _forget(self, batch: _Batch, error: BaseException) -> None:
        # Part of the batch may be stored all the same: what memory holds of these sessions can no longer be
        # vouched for, so their readers go to the store until the next append.
        for event in batch.events:
            self._drop_tail(event.session_id)
        batch.error, batch.done = error, True

    async def wait_stored(self, session_id: str, timeout_s: float) -> None:
        """Return when a batch with events of ``session_id`` is stored, or after ``timeout_s``.

        Only that session's batches end the wait: a reader is not woken by the traffic of others.
        """
        event = self._stored_watches.get(session_id)
        if event is None:
            event = self._stored_watches[session_id] = anyio.Event()
        with anyio.move_on_after(timeout_s):
            await event.wait()

    def stored_since(self, session_id: str, after_seq: int, limit: int) -> list[Event] | None:
        """The session's stored events with seq > ``after_seq`` (at most ``limit``), from memory; None: ask the store.

        What it returns is what the store would (the same events, in order), as far as memory reaches: None
        when ``after_seq`` is older than the events held, or when nothing newer is held and memory cannot
        vouch that nothing newer is stored (no run of this process is writing the session).
        """
        tail = self._tails.get(session_id)
        if tail is None or after_seq < tail.base:
            return None
        start = after_seq - tail.base
        if start >= len(tail.events):
            return [] if tail.active else None
        return list(itertools.islice(tail.events, start, start + limit))

    def publish_live(self, event: Event) -> None:
        """Publish an event that is not stored (a text delta); deltas also extend the session's live step.

        The event also goes to :attr:`live_sink`, when there is one.
        """
        if isinstance(event, TextDelta | ToolCallDelta):
            self._note_live(event)
        elif isinstance(event, ToolProgress):
            self._progress.setdefault(event.session_id, {})[event.call_id] = event
        self._publish((event,))
        self._notify(event.session_id)
        if self.live_sink is not None:
            self.live_sink(event)

    def receive_live(self, event: Event) -> None:
        """Publish a live event another process published, as :meth:`publish_live` does, but to no sink."""
        # publish_live's body, repeated rather than called: a delta's cost in the embedded loop stays what it was.
        if isinstance(event, TextDelta | ToolCallDelta):
            self._note_live(event)
        elif isinstance(event, ToolProgress):
            self._progress.setdefault(event.session_id, {})[event.call_id] = event
        self._publish((event,))
        self._notify(event.session_id)

    def progress(self, session_id: str) -> list[ToolProgress]:
        """The latest progress report of each of the session's tool calls in flight that reported any."""
        return list(self._progress.get(session_id, {}).values())

    def live(self, session_id: str) -> LiveStep | None:
        """The session's step in flight, as of its newest stored event; None when nothing is streaming."""
        partial = self._partials.get(session_id)
        return partial.snapshot() if partial is not None else None

    def last_seq(self, session_id: str) -> int | None:
        """The newest seq stored through this log for a session with a run in progress, else None.

        Or, for a session whose events this log does not hold, the newest another process stored, as the feed
        reported it (:meth:`note_remote`).
        """
        tail = self._tails.get(session_id)
        if tail is None:
            return self._floors.get(session_id)
        return tail.newest if tail.active else None

    def newest_held(self, session_id: str) -> int | None:
        """The newest seq of the session this log holds in memory, with or without a run in progress; else None.

        Without a run of this process writing the session, the store may hold newer events (another writer):
        the value is then a floor, not the newest stored. Anything appended through this log later is newer.
        """
        tail = self._tails.get(session_id)
        return tail.newest if tail is not None else self._floors.get(session_id)

    def watch(self, session_id: str) -> anyio.Event:
        """An event set at the session's next change: a stored batch with its events, or one of its live deltas.

        Take it before reading, then wait on it: a change that lands during the read still wakes the reader.
        """
        event = self._watches.get(session_id)
        if event is None:
            event = self._watches[session_id] = anyio.Event()
        return event

    async def note_remote(self, session_id: str, last_seq: int) -> None:
        """Another process stored events of the session, up to ``last_seq``: catch up, then wake its readers.

        A report of nothing newer than memory holds (this process's own append, told back) changes nothing. Where
        this log holds something of the session (its newest events, the step in flight), it reads what is new from
        the store (at most :data:`TAIL_EVENTS`) and takes it as if appended here: the tail stays exact, and a
        stored message ends the live text it holds. Otherwise, or if the read fails, it drops what it held, so
        readers go to the store, and keeps only the newest seq. Only this session's readers are woken.
        """
        tail = self._tails.get(session_id)
        held = tail.newest if tail is not None else self._floors.get(session_id)
        if held is not None and last_seq <= held:
            return
        if tail is None and session_id not in self._partials and session_id not in self._progress:
            self._floor(session_id, last_seq)
            self._wake(session_id)
            return
        # Read before taking anything: what memory holds stays as it was until the read says what is new.
        after = max(held or 0, last_seq - TAIL_EVENTS)
        try:
            events = await self.store.read_events(session_id, after_seq=after, limit=last_seq - after)
        except StoreError:
            events = []
        tail = self._tails.get(session_id)  # this process may have appended during the read
        newest = tail.newest if tail is not None else after
        if max((e.seq or 0 for e in events), default=newest) < last_seq:
            # Cannot be vouched for (the read failed): readers go to the store until the next append.
            self._drop_tail(session_id)
            self._lose_live(session_id)
            self._floor(session_id, last_seq)
            self._wake(session_id)
            return
        fresh = [e for e in events if e.seq is not None and e.seq > newest]
        if fresh:
            self._note_stored(fresh)
        else:
            self._wake(session_id)

    def note_remote_gap(self) -> None:
        """The feed may have missed reports (its connection dropped): forget what memory cannot vouch for.

        Every tail and step in flight is dropped (the rest of a step whose text had a gap is not shown live: the
        stored message will hold it whole), and every reader is woken to read the store.
        """
        for sid in list(self._partials):
            self._lose_live(sid)
        self._progress.clear()
        self._tails.clear()
        self._idle.clear()
        self._floors.clear()
        for sid in list(self._watches) + list(self._stored_watches):
            self._wake(sid)

    def _lose_live(self, session_id: str) -> None:
        partial = self._partials.pop(session_id, None)
        if partial is not None:
            self._lost[session_id] = (partial.run_id, partial.step)
        self._progress.pop(session_id, None)

    def _floor(self, session_id: str, seq: int) -> None:
        self._floors[session_id] = seq
        self._floors.move_to_end(session_id)
        while len(self._floors) > REMOTE_FLOORS:
            self._floors.popitem(last=False)

    def _wake(self, session_id: str) -> None:
        self._notify(session_id)
        stored = self._stored_watches.pop(session_id, None)
        if stored is not None:
            stored.set()

    def _note_stored(self, events: Sequence[Event]) -> None:
        touched: dict[str, None] = {}
        for event in events:
            sid = event.session_id
            touched[sid] = None
            self._hold(event)
            partial = self._partials.get(sid)
            ends = isinstance(event, AssistantMessage | ModelRetry | RunFinished)
            # An earlier step's message (read from the store by note_remote) does not end this one's text.
            if (
                partial is not None
                and ends
                and getattr(event, "run_id", None) == partial.run_id
                and getattr(event, "step", partial.step) >= partial.step
            ):
                del self._partials[sid]  # the stored message holds the text now, or the attempt is over
            reports = self._progress.get(sid)
            if reports and isinstance(event, ToolCallFinished | RunFinished):  # the call (or its run) is over
                if isinstance(event, RunFinished):
                    reports.clear()
                reports.pop(getattr(event, "call_id", ""), None)
                if not reports:
                    del self._progress[sid]
        for sid in touched:  # _wake, inlined: this runs for every stored batch
            self._notify(sid)
            stored = self._stored_watches.pop(sid, None)
            if stored is not None:
                stored.set()

    def _hold(self, event: Event) -> None:
        sid = event.session_id
        if event.seq is None or isinstance(event, SessionArchived):
            self._drop_tail(sid)  # an archived session is not followed any more
            return
        tail = self._tails.get(sid)
        if tail is None:
            tail = self._tails[sid] = _Tail(base=event.seq - 1)
            if self._floors:
                self._floors.pop(sid, None)
        tail.add(event, event.seq)
        if isinstance(event, RunFinished):
            # Only a run in progress streams, and only while it writes does this process know the newest seq.
            tail.active = False
            if self._lost:
                self._lost.pop(sid, None)
            self._idle[sid] = None
            self._idle.move_to_end(sid)
            while len(self._idle) > IDLE_TAILS:
                oldest, _ = self._idle.popitem(last=False)
                self._tails.pop(oldest, None)
        elif not tail.active:
            tail.active = True
            self._idle.pop(sid, None)

    def _drop_tail(self, session_id: str) -> None:
        self._tails.pop(session_id, None)
        self._idle.pop(session_id, None)

    def _note_live(self, event: TextDelta | ToolCallDelta) -> None:
        sid = event.session_id
        partial = self._partials.get(sid)
        if partial is None or (partial.run_id, partial.step) != (event.run_id, event.step):
            if self._lost and self._lost.pop(sid, None) == (event.run_id, event.step):
                self._lost[sid] = (event.run_id, event.step)  # its beginning was missed: not shown live
                return
            partial = self._partials[sid] = _Partial(event.run_id, event.step, self.last_seq(sid) or 0)
        if isinstance(event, TextDelta):
            partial.text += event.text
            return
        call = partial.calls.setdefault(event.index, ["", "", ""])
        call[0] = event.call_id or call[0]
        call[1] = event.name or call[1]
        call[2] += event.arguments

    def _notify(self, session_id: str) -> None:
        event = self._watches.pop(session_id, None)
        if event is not None:
            event.set()

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
