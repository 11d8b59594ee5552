"""The sessions panel's two small dialogs: a title to type (rename) and a yes/no (archive)."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label

from orchestrator.store.session_view import MAX_TITLE_CHARS

__all__ = ["ConfirmArchive", "RenameDialog"]


class RenameDialog(ModalScreen[str | None]):
    """Type a session's title: Enter keeps it (empty removes it), Escape leaves it as it was."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, name: str, title: str) -> None:
        super().__init__(classes="session-dialog")
        self._name, self._title = name, title

    def compose(self) -> ComposeResult:
        """A label naming the session over the input."""
        with Vertical(classes="dialog"):
            yield Label(f"Title for {self._name} (Enter keeps it, Escape cancels)")
            yield Input(self._title, placeholder="untitled", max_length=MAX_TITLE_CHARS, id="title")

    def on_mount(self) -> None:
        """The input takes the keys."""
        self.query_one(Input).focus()

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        """Leave the title as it was."""
        self.dismiss(None)


class ConfirmArchive(ModalScreen[bool]):
    """Archive a session? ``y`` archives, ``n`` or Escape does not."""

    BINDINGS = [
        Binding("y", "answer(True)", "Archive"),
        Binding("n,escape", "answer(False)", "Keep"),
    ]

    def __init__(self, name: str) -> None:
        super().__init__(classes="session-dialog")
        self._name = name

    def compose(self) -> ComposeResult:
        """The question."""
        with Vertical(classes="dialog"):
            yield Label(f"Archive {self._name}? It leaves the list and is kept in the store.")
            yield Label("y archives · n or Escape keeps it", classes="hint")

    def action_answer(self, archive: bool) -> None:
        """Close the dialog with the answer."""
        self.dismiss(archive)
