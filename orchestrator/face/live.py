"""``read_events``' page: the stored events after a cursor, and the model step in flight.

The stored log is the truth; ``live`` rides on top of it. It describes, as of ``next_after_seq``, the
text (and tool-call arguments) the model has streamed in a step whose ``assistant_message`` is not
stored yet, so a follower that arrives mid-message gets what was written so far, then the rest, and
the stored message, once it comes, is the whole of it. ``live`` is only sent with a page that reaches
the session's newest stored event: text from a later step never overtakes the events before it.

A caller that passes back ``live.cursor`` as ``live_cursor`` is sent only the text it does not hold
(``text_offset`` says where it starts), and a long-poll ends as soon as there is more. A caller that
passes nothing gets all of it each time, and its long-poll ends when the text grows during the call.

A follower can also keep one call open (:func:`stream_pages`): each change is pushed to it as a page the
moment it is stored or streamed, instead of the follower asking again after every page. A long-poll
leaves the events made while one page travels to the client and the next request comes back waiting for
that round trip; over HTTP it is most of an event's delivery time once a daemon is busy.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio

from orchestrator.protocol import EventPage, LiveInfo, LiveToolCallInfo
from orchestrator.store.eventlog import EventLog, LiveStep


def cursor_of(step: LiveStep | None) -> str:
    """The live cursor naming ``step``'s attempt and how much of it there is (``""`` for none)."""
    if step is None:
        return ""
    size = len(step.text) + sum(len(c.arguments) for c in step.tool_calls)
    return f"{step.run_id}:{step.step}:{step.after_seq}:{len(step.text)}:{size}"


def held_text(cursor: str, step: LiveStep) -> int:
    """How much of ``step``'s text a caller holding ``cursor`` has (0 for another attempt, or a bad cursor)."""
    parts = cursor.rsplit(":", 4)
    if len(parts) != 5 or parts[:3] != [step.run_id, str(step.step), str(step.after_seq)]:
        return 0
    try:
        held = int(parts[3])
    except ValueError:
        return 0
    return max(0, min(held, len(step.text)))


def live_info(step: LiveStep | None, cursor: str | None) -> LiveInfo | None:
    """``step`` on the wire, its text cut to what a caller holding ``cursor`` lacks."""
    if step is None:
        return None
    offset = held_text(cursor, step) if cursor else 0
    return LiveInfo(
        cursor=cursor_of(step),
        run_id=step.run_id,
        step=step.step,
        after_seq=step.after_seq,
        text_offset=offset,
        text=step.text[offset:],
        tool_calls=[
            LiveToolCallInfo(index=c.index, call_id=c.call_id, name=c.name, arguments_so_far=c.arguments)
            for c in step.tool_calls
        ],
    )


async def read_page(
    log: EventLog, session_id: str, after_seq: int, wait_s: float, limit: int, cursor: str | None
) -> EventPage:
    """Events with seq > ``after_seq`` and the step in flight, waiting up to ``wait_s`` for either to change.

    The wait ends when a stored event comes, or the live step differs from what the caller holds
    (``cursor``; without one, from what it was when the call began). Only this session's changes wake it.
    """
    deadline = anyio.current_time() + wait_s
    baseline = cursor if cursor is not None else cursor_of(log.live(session_id))
    reported = log.progress(session_id)
    rereads = 0
    while True:
        changed = log.watch(session_id)  # before reading: a change during the read still wakes us
        # A follower a few events behind is served from the log's memory of the session's newest events, and
        # one that holds the newest while a run streams is waiting for text alone: neither asks the store.
        events = log.stored_since(session_id, after_seq, limit)
        if events is None:  # an older cursor, or a session no run of this process is writing
            events = await log.store.read_events(session_id, after_seq=after_seq, limit=limit)
        last = events[-1].seq if events and events[-1].seq is not None else after_seq
        newest = log.last_seq(session_id)
        if not events and newest is not None and newest > last and rereads < 3:
            rereads += 1  # stored while we read (the message that ends the live text, say): read it now
            continue
        step = log.live(session_id) if newest is None or last >= newest else None
        remaining = deadline - anyio.current_time()
        progress = log.progress(session_id)
        if events or cursor_of(step) != baseline or progress != reported or remaining <= 0:
            return EventPage(
                session_id=session_id,
                events=events,
                next_after_seq=last,
                live=live_info(step, cursor),
                progress=progress,
            )
        with anyio.move_on_after(remaining):
            await changed.wait()


async def read_back(log: EventLog, session_id: str, after_seq: int, before_seq: int, limit: int) -> EventPage:
    """The newest ``limit`` stored events with ``after_seq`` < seq < ``before_seq``, oldest first.

    One more is read to tell whether older ones remain (``more_before``). ``next_after_seq`` is the page's last
    seq, so a caller that read the end can follow forward from it; the page carries no ``live``, and a follower
    reading forward from there gets the step in flight whole.
    """
    events = await log.store.read_events(session_id, after_seq=after_seq, before_seq=before_seq, limit=limit + 1)
    more = len(events) > limit
    if more:
        events = events[1:]
    last = events[-1].seq if events and events[-1].seq is not None else after_seq
    return EventPage(session_id=session_id, events=events, next_after_seq=last, more_before=more)


SEND_TIMEOUT_S = 10.0
"""How long one pushed page may take to be written to the caller: a follower that stops reading ends its call."""


async def stream_pages(
    log: EventLog,
    session_id: str,
    after_seq: int,
    wait_s: float,
    limit: int,
    cursor: str | None,
    send: Callable[[EventPage], Awaitable[None]],
) -> EventPage:
    """Follow the session for ``wait_s``: every page with something new goes to ``send`` as soon as it is there.

    Each page continues from the one before (its events follow the last one sent, its live text is what the
    caller does not hold yet, as with ``live_cursor``), so the pages sent and then the page returned are,
    together, what a caller passing each page's cursors back to :func:`read_page` would have read, batched
    as the changes came. The returned page is what is new since the last one sent (usually nothing), with the
    cursors to carry on from.

    Raises:
        TimeoutError: a page could not be written within :data:`SEND_TIMEOUT_S` (the caller stopped reading).
    """
    deadline = anyio.current_time() + wait_s
    if cursor is None:  # the caller holds no live text: the first page is the history and all of it
        first = await read_page(log, session_id, after_seq, 0.0, limit, None)
        if wait_s <= 0:
            return first
        if first.events or first.live is not None:
            with anyio.fail_after(SEND_TIMEOUT_S):
                await send(first)
        after_seq, cursor = first.next_after_seq, first.live.cursor if first.live is not None else ""
    while True:
        page = await read_page(log, session_id, after_seq, max(0.0, deadline - anyio.current_time()), limit, cursor)
        held = page.live.cursor if page.live is not None else ""
        if anyio.current_time() >= deadline:
            return page
        if page.events or held != cursor or page.progress:
            with anyio.fail_after(SEND_TIMEOUT_S):
                await send(page)
            after_seq, cursor = page.next_after_seq, held
