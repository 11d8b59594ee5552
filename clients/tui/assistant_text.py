"""The assistant's text for one model step, streamed as it is written.

Deltas are gathered and appended to the Markdown document by one worker owned by the widget, so a burst of
deltas becomes one append (Textual's ``Markdown.append`` re-parses only the last block and mounts new ones):
the text grows block by block, never re-rendered whole per delta, which is what keeps it from flickering.
"""

from __future__ import annotations

import anyio
from textual import events, on
from textual.widgets import Markdown

__all__ = ["AssistantText"]


class AssistantText(Markdown):
    """The text of one step (``run_id``, ``step``); :meth:`finish` makes it the stored text exactly."""

    def __init__(self, *, run_id: str, step: int, text: str = "") -> None:
        super().__init__()
        self.run_id = run_id
        self.step = step
        self._pending = text
        self._final: str | None = None
        self._wake = anyio.Event()
        self.settled = anyio.Event()
        """Set once the stored text is shown (tests wait on it)."""

    @on(events.Mount)
    def _mounted(self) -> None:
        self.run_worker(self._flush_loop(), exclusive=True, group="flush")

    def feed(self, text: str) -> None:
        """Add streamed text (shown at the next flush)."""
        self._pending += text
        self._wake.set()

    def finish(self, text: str) -> None:
        """The step's stored text: shown exactly, whatever was streamed."""
        self._final = text
        self._wake.set()

    @property
    def shown(self) -> str:
        """The Markdown source shown so far, with what is waiting to be shown."""
        return self.source + self._pending

    async def _flush_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            while self._pending:
                piece, self._pending = self._pending, ""
                await self.append(piece)
            if self._final is not None:
                if self.source != self._final:
                    await self.update(self._final)
                self.settled.set()
                return
