"""A quiet line in the conversation: notices, retries, compactions, model switches, a run's end."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

__all__ = ["NoticeLine"]


class NoticeLine(Static):
    """One notice, dim unless it is a warning or an error."""

    def __init__(self, text: str, *, level: str = "info") -> None:
        super().__init__(Text(text), classes=f"-{level}")
        self.text = text
        """What the notice says (kept for tests and copying)."""
