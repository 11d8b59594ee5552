"""Following a controller's session (an orchestration, a goal) until it ends, with Ctrl-C cancelling it.

`loom orchestrate` and `loom goal` both print the lines of one controller's events from a session's log, stop
once its end is stored and drained, and turn Ctrl-C (or SIGTERM) into a cancel of what they follow. Standard
library only at import, like the CLI modules that use it (anyio is imported when following starts).
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from clients.loom import LoomClient
    from orchestrator.events import Event

__all__ = ["CANCEL_WAIT_S", "follow_session"]

CANCEL_WAIT_S = 30.0
"""How long Ctrl-C waits for the cancel to be recorded (children cancelled) before the command exits anyway."""


async def follow_session(
    client: LoomClient,
    session_id: str,
    after: int,
    *,
    as_json: bool,
    line_of: Callable[[Event], str | None],
    is_end: Callable[[Event], bool],
    has_ended: Callable[[], Awaitable[bool]],
    cancel: Callable[[], Awaitable[object]],
    what: str,
) -> bool:
    """Print each event's line (its JSON with ``as_json``) after ``after`` until the end; whether Ctrl-C ended it.

    Args:
        client: The face to read from.
        session_id: The controller's session, whose log holds its events.
        after: The seq to read after (the start's, so nothing before it is printed again).
        as_json: Print each event as its JSON line instead of its text.
        line_of: The text printed for an event (None: not this controller's, or nothing to say).
        is_end: Whether an event is the end of what is followed (then the rest of the page is drained).
        has_ended: Asked after a quiet long-poll (a page of nothing may hide the end behind other events).
        cancel: Called once on Ctrl-C or SIGTERM, bounded by ``CANCEL_WAIT_S``.
        what: What is cancelled, for the line Ctrl-C prints ("the goal").
    """
    import anyio

    cancelled = False
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with anyio.create_task_group() as tg:

            async def cancel_on_signal() -> None:
                nonlocal cancelled
                async for _ in signals:
                    cancelled = True
                    sys.stderr.write(f"loom: cancelling {what}\n")
                    with anyio.move_on_after(CANCEL_WAIT_S):
                        await cancel()
                    tg.cancel_scope.cancel()
                    return

            tg.start_soon(cancel_on_signal)
            ended = False
            while True:
                page = await client.read_events(session_id, after_seq=after, wait_s=0 if ended else 30)
                after = page.next_after_seq
                for event in page.events:
                    line = line_of(event)
                    if line is not None:
                        sys.stdout.write(event.model_dump_json() + "\n" if as_json else line + "\n")
                        sys.stdout.flush()
                    if is_end(event):
                        ended = True
                if ended and not page.events:
                    break
                if not page.events:
                    ended = await has_ended()
            tg.cancel_scope.cancel()
    return cancelled
