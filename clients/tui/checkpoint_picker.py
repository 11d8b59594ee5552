"""``/rewind``'s picker: the session's checkpoints (one before each run), newest first; Enter picks, Escape backs out.

The screen is dismissed with the chosen checkpoint's run id (None: backed out); the caller rewinds.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from orchestrator.protocol import CheckpointInfo

__all__ = ["CheckpointPicker"]


class CheckpointPicker(ModalScreen[str | None]):
    """A list of checkpoints to rewind to; dismissed with the chosen one's ``run_id``."""

    BINDINGS = [Binding("escape", "dismiss_none", "Back")]

    def __init__(self, checkpoints: Sequence[CheckpointInfo]) -> None:
        super().__init__()
        self.checkpoints = list(reversed(checkpoints))
        """Newest first, as listed."""

    def compose(self) -> ComposeResult:
        """A heading over the list."""
        with Vertical(id="checkpoint-picker"):
            yield Static("Rewind to before which run? (Enter picks, Escape backs out)", id="checkpoint-heading")
            yield OptionList(*(Option(_label(c), id=c.run_id) for c in self.checkpoints), id="checkpoints")

    def on_mount(self) -> None:
        """The newest checkpoint highlighted, under the keys."""
        options = self.query_one("#checkpoints", OptionList)
        options.highlighted = 0
        options.focus()

    @on(OptionList.OptionSelected, "#checkpoints")
    def _picked(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_dismiss_none(self) -> None:
        """Back out without rewinding."""
        self.dismiss(None)


def _label(c: CheckpointInfo) -> Text:
    prompt = " ".join(c.prompt.split())
    label = Text(prompt[:60] + ("…" if len(prompt) > 60 else ""))
    when = time.strftime("%H:%M", time.localtime(c.started))
    files = f"{len(c.files_changed)} file{'s' if len(c.files_changed) != 1 else ''} changed"
    label.append(f"  {when} · {files}", style="dim")
    return label
