"""The multi-line prompt: Enter sends, Ctrl+J (or Shift+Enter where the terminal reports it) starts a new line.

Up on the first line walks back through what was sent before (:mod:`clients.tui.history`), Down on the last
line walks forward and, past the newest, brings back the draft being written. Typing ``/`` opens the
completion list under the prompt (:mod:`clients.tui.completion`): Up and Down then move in it, Tab takes the
highlighted entry, Escape closes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual import events, on
from textual.message import Message
from textual.widgets import TextArea

from clients.tui.commands import Completions, candidates
from clients.tui.completion import CompletionList
from clients.tui.history import PromptHistory

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

    @dataclass
    class CompletionWanted(Message):
        """The user started a command: what completes it (skills, models) is worth refreshing."""

        prompt: Prompt

    def __init__(self, recall: PromptHistory | None = None) -> None:
        super().__init__(id="prompt", soft_wrap=True, show_line_numbers=False, tab_behavior="focus")
        self.border_title = "message (Enter sends, Ctrl+J new line, / commands)"
        self.recall = recall or PromptHistory(None)
        self.known = Completions()
        """Skills and models the completion list offers besides the commands (the app refreshes them)."""
        self._recalled: str | None = None
        """The entry the history walk put in the prompt: no completion is offered for it until it is edited."""

    def on_mount(self) -> None:
        """Read the kept history in a worker (the file is small, but the UI thread reads no files)."""
        self.run_worker(self.recall.load(), group="history")

    @property
    def completion(self) -> CompletionList | None:
        """The completion list under this prompt, if the screen has one."""
        found = self.screen.query(CompletionList)
        return found.first() if found else None

    def set_text(self, text: str) -> None:
        """Replace the text, the cursor at its end."""
        self.text = text
        self.move_cursor(self.document.end)

    def refresh_completion(self) -> None:
        """Offer again what completes the text (after :attr:`known` changed)."""
        menu = self.completion
        if menu is not None:
            menu.offer([] if self.text == self._recalled else candidates(self.text, self.known))

    @on(TextArea.Changed)
    def _changed(self, event: TextArea.Changed) -> None:
        if event.text_area is not self:
            return
        if self.text == "/":
            self.post_message(self.CompletionWanted(self))
        self.refresh_completion()

    async def _on_key(self, event: events.Key) -> None:
        if self._handled(event.key):
            event.stop()
            event.prevent_default()
            return
        await super()._on_key(event)

    def _handled(self, key: str) -> bool:
        """Carry out ``key`` if it is one of the prompt's own (True), else leave it to the text area."""
        menu = self.completion
        open_menu = menu is not None and menu.open
        if key == "enter":
            self._submit()
        elif key in NEWLINE_KEYS:
            self.insert("\n")
        elif key == "tab" and menu is not None and open_menu:
            chosen = menu.chosen()
            if chosen is not None:
                self.set_text(chosen.text if chosen.text.endswith(":") else chosen.text + " ")
        elif key == "escape" and menu is not None and open_menu:
            menu.hide()
        elif key in ("up", "down") and menu is not None and open_menu:
            menu.move(-1 if key == "up" else 1)
        elif key == "up" and self.cursor_location[0] == 0:
            recalled = self.recall.older(self.text)
            if recalled is None:
                return False
            self._recalled = recalled
            self.set_text(recalled)
        elif key == "down" and self.cursor_location[0] == self.document.line_count - 1 and self.recall.walking:
            newer = self.recall.newer()
            if newer is not None:
                self._recalled = newer if self.recall.walking else None
                self.set_text(newer)
        else:
            return False
        return True

    def _submit(self) -> None:
        text = self.text.strip()
        if not text:
            return
        self.post_message(self.Submitted(self, text))
        if self.recall.add(text):
            self.run_worker(self.recall.save(text), group="history")
        self.clear()
