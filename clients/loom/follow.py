"""Following a session: its stored events and, made from each page's ``live`` part, its text as it is written."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from orchestrator.events import AssistantMessage, RunFinished, RunStarted, SessionCreated, TextDelta, ToolCallDelta
from orchestrator.messages import ToolUseBlock
from orchestrator.protocol import Event, EventPage, LiveInfo

if TYPE_CHECKING:
    from clients.loom.client import LoomClient

__all__ = ["END", "LiveFollower", "read_older"]

END = 2**62
"""A ``before_seq`` past any session's newest event: reading backwards from it reads the end."""

PAGE = 200
"""Events per page read backwards (the face's default page)."""


async def read_older(
    client: LoomClient, session_id: str, before_seq: int = END, *, limit: int = PAGE
) -> tuple[list[Event], bool]:
    """The whole runs before ``before_seq``, oldest first, and whether older events remain.

    Pages are read backwards until one holds the start of a run (``run_started``) or of the session
    (``session_created``); the events before the oldest such start, the end of a run whose beginning was not
    read, are left for the next call. So what is read never starts in the middle of a run: a renderer that keys
    tool calls, texts and cards within a run shows each run whole. One page is read unless a run is longer.
    """
    events: list[Event] = []
    while True:
        page = await client.read_events(session_id, before_seq=before_seq, limit=limit)
        events[0:0] = page.events
        start = next((i for i, e in enumerate(page.events) if isinstance(e, RunStarted | SessionCreated)), None)
        if start is not None:
            return events[start:], start > 0 or page.more_before
        if not page.more_before or not page.events or page.events[0].seq is None:
            return events, False
        before_seq = page.events[0].seq


class LiveFollower:
    """Follows one session through ``read_events``: its stored events, with the text in flight as it is written.

    The live text comes as :class:`~orchestrator.events.TextDelta` events made here from the page's ``live``
    part (and :class:`~orchestrator.events.ToolCallDelta` for streamed tool arguments), so a renderer shows
    them as it shows an embedded run's. What was shown is remembered per attempt of a step (run, step,
    ``after_seq``); when the step's ``assistant_message`` arrives, only the part of its text (and of each tool
    call's arguments) not shown yet is given as one more delta before it: attach or reconnect mid-message,
    and nothing is doubled or missed.

    Args:
        session_id: the session to follow.
        after_seq: the stored events to skip.
        every_message: give every stored message's unshown text and tool arguments as deltas, even one nothing
            of which was seen live (``loom run``, so that its output has the same event types however fast the
            model was); otherwise only messages seen in part get them, and replayed history keeps its messages
            alone (``loom attach``).
    """

    def __init__(self, session_id: str, after_seq: int = 0, *, every_message: bool = False) -> None:
        self.session_id = session_id
        self.cursor = after_seq
        self.older: int | None = None
        """After :meth:`open_at_end`: the seq older events come before (``read_older``'s ``before_seq``), or None
        when the session was read from its first event."""
        self.opened = after_seq > 0
        """Something was read (or skipped): :meth:`open_at_end` would no longer read the end."""
        self.live_cursor = ""
        self._every = every_message
        self._shown: dict[tuple[str, int], tuple[int, str]] = {}
        self._reported: dict[str, float] = {}
        """call id -> the progress last shown of it (a page repeats the latest report of each call in flight)"""
        """(run, step) -> (after_seq of the attempt shown, its text shown so far)"""
        self._arguments: dict[tuple[str, int, int, int], str] = {}
        """(run, step, after_seq, call index) -> its arguments' JSON text shown so far"""

    async def open_at_end(self, client: LoomClient, *, limit: int = PAGE) -> list[Event]:
        """The session's last whole runs (at least ``limit`` events, or all of them), to show before following.

        The cursor moves to the newest event read, so :meth:`next` and :meth:`stream` go on from there with
        nothing doubled or missed; :attr:`older` says where the older history is (:func:`read_older`).
        """
        events, more = await read_older(client, self.session_id, limit=limit)
        self.opened = True
        self.older = events[0].seq if more and events else None
        last = events[-1].seq if events and events[-1].seq is not None else self.cursor
        return self.take(EventPage(session_id=self.session_id, events=events, next_after_seq=last))

    async def next(self, client: LoomClient, wait_s: float) -> list[Event]:
        """One ``read_events`` call (a long-poll of up to ``wait_s``): the events to show, in order."""
        page = await client.read_events(
            self.session_id, after_seq=self.cursor, wait_s=wait_s, live_cursor=self.live_cursor
        )
        return self.take(page)

    async def stream(self, client: LoomClient, wait_s: float, on_events: Callable[[list[Event]], None]) -> None:
        """One ``read_events`` call held open for up to ``wait_s``: the events to show go to ``on_events`` as they come.

        The face pushes each change as it happens rather than answering once per call, so nothing waits for
        a round trip (see :func:`orchestrator.face.live.stream_pages`); the cursors move as with :meth:`next`.
        """

        def pushed(page: EventPage) -> None:
            events = self.take(page)
            if events:
                on_events(events)

        pushed(
            await client.stream_events(
                self.session_id, pushed, after_seq=self.cursor, wait_s=wait_s, live_cursor=self.live_cursor
            )
        )

    def take(self, page: EventPage) -> list[Event]:
        """The events of one ``read_events`` page, live text included, and the cursors moved past them."""
        self.opened = True
        out: list[Event] = []
        for event in page.events:
            if event.seq is not None and event.seq <= self.cursor:
                continue  # held already (a page that overlaps the one before): never shown twice
            if isinstance(event, AssistantMessage):
                out.extend(self._rest_of(event))
            elif isinstance(event, RunFinished):
                self._forget(event.run_id)
            out.append(event)
        self.cursor = page.next_after_seq
        live = page.live
        self.live_cursor = live.cursor if live else ""
        if live:
            out.extend(self._live(live))
        for report in page.progress:  # the latest of each call in flight: only a new one is shown
            if self._reported.get(report.call_id) != report.progress:
                self._reported[report.call_id] = report.progress
                out.append(report)
        return out

    def _rest_of(self, message: AssistantMessage) -> list[Event]:
        run_id, step = message.run_id, message.step
        shown = self._shown.pop((run_id, step), None)
        text, before = message.message.text, shown[1] if shown else ""
        # A streamed text that is not the start of the stored one (never seen from our providers) stays
        # as it was shown rather than being shown twice.
        rest = text[len(before) :] if text.startswith(before) else ""
        out: list[Event] = []
        if rest and (shown is not None or self._every):
            out.append(TextDelta(session_id=self.session_id, run_id=run_id, step=step, text=rest))
        calls = [b for b in message.message.content if isinstance(b, ToolUseBlock)]
        for index, call in enumerate(calls):
            seen = self._arguments.get((run_id, step, shown[0], index)) if shown else None
            if seen is None and not self._every:
                continue
            piece = _unshown_arguments(seen or "", call.input)
            if piece or seen is None:
                first = seen is None  # nothing of this call was shown: its id and name come with it
                out.append(
                    ToolCallDelta(
                        session_id=self.session_id,
                        run_id=run_id,
                        step=step,
                        index=index,
                        call_id=call.id if first else "",
                        name=call.name if first else "",
                        arguments=piece,
                    )
                )
        return out

    def _live(self, live: LiveInfo) -> list[Event]:
        run_id, step, after_seq = live.run_id, live.step, live.after_seq
        shown = self._shown.get((run_id, step))
        if shown is None or shown[0] != after_seq:
            shown = (after_seq, "")  # a new attempt streams from nothing; an earlier one stays shown
        offset, have = live.text_offset, len(shown[1])
        if offset > have:  # sent from past what we hold: ask for all of it
            self.live_cursor = ""
            return []
        out: list[Event] = []
        new = live.text[have - offset :]
        if new:
            out.append(TextDelta(session_id=self.session_id, run_id=run_id, step=step, text=new))
        self._shown[(run_id, step)] = (after_seq, shown[1] + new)
        for c in live.tool_calls:
            key = (run_id, step, after_seq, c.index)
            done = self._arguments.get(key)
            piece = c.arguments_so_far[len(done or "") :]
            if piece or done is None:
                self._arguments[key] = (done or "") + piece
                out.append(
                    ToolCallDelta(
                        session_id=self.session_id,
                        run_id=run_id,
                        step=step,
                        index=c.index,
                        call_id=c.call_id,
                        name=c.name,
                        arguments=piece,
                    )
                )
        return out

    def _forget(self, run_id: str) -> None:
        for key in [k for k in self._shown if k[0] == run_id]:
            del self._shown[key]
        for args_key in [k for k in self._arguments if k[0] == run_id]:
            del self._arguments[args_key]


def _unshown_arguments(shown: str, arguments: dict[str, Any]) -> str:
    """What is left to show of a call's arguments, given the JSON text shown live (``""``: nothing)."""
    whole = json.dumps(arguments, ensure_ascii=False)
    if whole.startswith(shown):
        return whole[len(shown) :]
    # The provider spelled the JSON its own way (spaces, key order): what it streamed cannot be continued with
    # our spelling, so it stays as shown (whole, unless the last pieces came too late) rather than doubled.
    return ""
