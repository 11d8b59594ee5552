"""The completion list under the prompt: what completes the command being typed (``/`` shows them all).

It never takes the focus: the prompt keeps the keys and moves the highlight (Up, Down), takes the highlighted
one (Tab), or hides the list (Escape). Hidden when nothing completes.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from clients.tui.commands import Candidate

__all__ = ["CompletionList"]


class CompletionList(OptionList, can_focus=False):
    """Candidates for the prompt's text, the first highlighted."""

    def __init__(self) -> None:
        super().__init__(id="completion")
        self.display = False
        self.candidates: list[Candidate] = []
        """What is shown, in order (for the prompt and the tests)."""

    def offer(self, found: Sequence[Candidate]) -> None:
        """Show ``found`` (hide the list when it is empty)."""
        if list(found) == self.candidates:
            return
        self.candidates = list(found)
        self.clear_options()
        for c in self.candidates:
            label = Text(c.text)
            if c.about:
                label.append(f"  {c.about}", style="dim")
            self.add_option(Option(label))
        self.display = bool(self.candidates)
        if self.candidates:
            self.highlighted = 0

    def hide(self) -> None:
        """Hide the list until the text changes again."""
        self.offer([])

    @property
    def open(self) -> bool:
        """Whether candidates are shown."""
        return bool(self.candidates)

    def move(self, by: int) -> None:
        """Move the highlight ``by`` places, wrapping around."""
        if self.candidates:
            self.highlighted = ((self.highlighted or 0) + by) % len(self.candidates)

    def chosen(self) -> Candidate | None:
        """The highlighted candidate."""
        if not self.candidates:
            return None
        return self.candidates[self.highlighted or 0]
