"""Server-sent events, parsed a line at a time so that each message is relayed the moment it arrives.

Only what the daemon's streamable-HTTP face sends is needed: ``data:`` lines (joined by newlines),
``event:`` (a ``message`` or no name is a JSON-RPC message), ``id:`` (kept by :func:`events_with_ids` for the
one stream that resumes: a 2025-era session's GET stream, reopened with ``Last-Event-ID``), and ``retry:``
and comments, which are ignored. A POST's broken stream is not resumed (the 2026-07-28 revision removed
resumption), it is reported to the caller instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol


class LineSource(Protocol):
    """Anything with ``readline`` returning bytes, ``b""`` at the end (an ``http.client`` response)."""

    def readline(self, limit: int = -1, /) -> bytes:
        """The next line, with its line ending; ``b""`` once the stream has ended."""
        ...


MAX_EVENT_BYTES = 64 * 1024 * 1024
"""A bound on one event's size: a runaway stream must not eat the memory of the process."""


class EventTooLarge(Exception):
    """An event's data went past :data:`MAX_EVENT_BYTES`."""


def events(source: LineSource) -> Iterator[str]:
    """The data of each message event on ``source``, as soon as its blank line has been read.

    Raises:
        EventTooLarge: an event's data is larger than :data:`MAX_EVENT_BYTES`.
    """
    for data, _ in events_with_ids(source):
        yield data


def events_with_ids(source: LineSource) -> Iterator[tuple[str, str | None]]:
    """As :func:`events`, each with the stream's last event id so far (the spec's "last event ID buffer").

    Raises:
        EventTooLarge: an event's data is larger than :data:`MAX_EVENT_BYTES`.
    """
    data: list[str] = []
    size = 0
    name = ""
    last_id: str | None = None
    while True:
        raw = source.readline(MAX_EVENT_BYTES + 1)
        if not raw:
            return  # an event not ended by a blank line is incomplete, and dropped (as the spec says)
        line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        if not line:
            # Empty data (a resumable stream's priming event, ``data:`` alone) is no event, as the spec says.
            if data and data != [""] and name in ("", "message"):
                yield "\n".join(data), last_id
            data, size, name = [], 0, ""
            continue
        if line.startswith(":"):
            continue  # a comment: the server's keep-alive
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "data":
            size += len(value) + 1
            if size > MAX_EVENT_BYTES:
                raise EventTooLarge(f"an event from the daemon is larger than {MAX_EVENT_BYTES} bytes")
            data.append(value)
        elif field == "event":
            name = value
        elif field == "id" and "\0" not in value:
            last_id = value  # an id holding NUL is ignored, as the spec says
