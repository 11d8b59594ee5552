"""The multi-line prompt: Enter sends, Ctrl+J (or Shift+Enter where the terminal reports it) starts a new line."""

from __future__ import annotations

from dataclasses import dataclass

from textual import events
from textual.message import Message
from textual.widgets import TextArea

__all__ = ["Prompt"]

NEWLINE_KEYS = frozenset({"ctrl+j", "shift+enter"})
"""Most terminals send Shift+Enter as a plain Enter; Ctrl+J (a line feed) arrives in every one."""


class Prompt(TextArea):
    """Where the user writes; posts :class:`Prompt.Submitted` on Enter with the text, and empties itself."""

    @dataclass
    class Submitted(Message):
        """The user sent ``text`` (never empty)."""

        prompt: Prompt
        text: str

    def __init__(self) -> None:
        super().__init__(id="prompt", soft_wrap=True, show_line_numbers=False, tab_behavior="focus")
        self.border_title = "message (Enter sends, Ctrl+J new line)"

    async def _on_key(self, event: events.Key) -> None:
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            text = self.text.strip()
            if text:
                self.post_message(self.Submitted(self, text))
                self.clear()
            return
        if event.key in NEWLINE_KEYS:
            event.stop()
            event.prevent_default()
            self.insert("\n")
            return
        await super()._on_key(event)
