"""Bounded capture of a process's output stream."""

from __future__ import annotations

import codecs

__all__ = ["HeadTailBuffer"]


class HeadTailBuffer:
    """Keep the first and last bytes of a stream within a budget and count what was dropped between them.

    Both ends matter for a command's output: the head says what started, the tail holds the error or summary, and
    the middle of a long build log rarely does.

    Args:
        limit: Most bytes kept in total, split evenly between head and tail.

    Raises:
        ValueError: If limit is not positive.
    """

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"limit must be positive, got {limit}")
        self._head_limit = limit // 2
        self._tail_limit = limit - self._head_limit
        self._head = bytearray()
        self._tail = bytearray()
        self.total = 0
        """Bytes received so far."""

    def feed(self, data: bytes) -> None:
        """Add the next chunk of the stream.

        Args:
            data: Bytes in stream order.
        """
        self.total += len(data)
        room = self._head_limit - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if data:
            self._tail += data
            # Trimming only when the tail doubles keeps feeding amortised O(len(data)).
            if len(self._tail) > 2 * self._tail_limit:
                del self._tail[: -self._tail_limit]

    @property
    def dropped(self) -> int:
        """Bytes dropped from the middle of the stream."""
        return max(0, self.total - self._head_limit - self._tail_limit)

    @property
    def truncated(self) -> bool:
        """Whether anything was dropped."""
        return self.dropped > 0

    def text(self) -> str:
        """Decode what was kept as UTF-8, with a marker where bytes were dropped.

        Returns:
            The whole stream if it fit, else head, a ``[... N bytes dropped ...]`` line, and tail. Undecodable
            bytes become U+FFFD; a character split by the cut is dropped rather than garbled.
        """
        tail = bytes(self._tail[-self._tail_limit :])
        if not self.truncated:
            return (bytes(self._head) + tail).decode("utf-8", errors="replace")
        head = codecs.getincrementaldecoder("utf-8")(errors="replace").decode(bytes(self._head), final=False)
        # Skip UTF-8 continuation bytes so the tail starts on a character boundary.
        start = 0
        while start < min(len(tail), 3) and tail[start] & 0xC0 == 0x80:
            start += 1
        rest = tail[start:].decode("utf-8", errors="replace")
        # The marker gets a line of its own without doubling a newline already at either side of the cut.
        before = "" if head.endswith("\n") else "\n"
        after = "" if rest.startswith("\n") else "\n"
        return f"{head}{before}[... {self.dropped} bytes dropped ...]{after}{rest}"
