"""A message the user (or a driving agent) sent, marked while its run waits behind another."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

__all__ = ["UserMessageBlock"]


class UserMessageBlock(Static):
    """One user message; ``queued`` while its run waits for the session's earlier runs."""

    def __init__(self, text: str, *, run_id: str, queued: bool = False) -> None:
        super().__init__(classes="-queued" if queued else "")
        self.text = text
        """The message as sent (shown as plain text, never as markup)."""
        self.run_id = run_id
        self.queued = queued
        self.update(self._content())

    def started(self) -> None:
        """Its run started: it is no longer queued."""
        self.queued = False
        self.remove_class("-queued")
        self.update(self._content())

    def _content(self) -> Text:
        shown = Text("› ", style="bold")
        shown.append(self.text)
        if self.queued:
            shown.append("  (queued)", style="italic dim")
        return shown
