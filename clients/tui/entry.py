"""One block of the conversation as a record: how to build its widget, and what happened to it since.

The conversation keeps a record per block for the whole session but a widget only for the blocks near what
is shown. A record is the block's constructor plus the changes the session's events made to it, in order; a
widget built from it (the first time, or again after it was dropped while the user looked elsewhere) is the
same widget the events would have made live, so dropping and rebuilding loses nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from textual.widget import Widget

__all__ = ["Entry"]

W = TypeVar("W", bound=Widget)


class Entry(Generic[W]):
    """A block's record: ``make`` builds its widget, and each change is kept to apply to a rebuilt one."""

    __slots__ = ("_changes", "_make", "widget")

    def __init__(self, make: Callable[[], W]) -> None:
        self._make = make
        self._changes: list[Callable[[W], None]] = []
        self.widget: W | None = None
        """The block's widget while it is in the conversation's window, else None."""

    def change(self, apply: Callable[[W], None], *, replaces: bool = False) -> None:
        """Apply a change to the widget (if built) and keep it for a rebuild.

        Args:
            apply: the change.
            replaces: it makes the earlier changes moot (a step's stored text after its deltas), so only it
                is kept.
        """
        if replaces:
            self._changes.clear()
        self._changes.append(apply)
        if self.widget is not None:
            apply(self.widget)

    def build(self) -> W:
        """The block's widget, built and brought up to date with every change so far."""
        widget = self._make()
        for apply in self._changes:
            apply(widget)
        self.widget = widget
        return widget

    def drop(self) -> W | None:
        """Forget the widget (the caller removes it from the screen); the record stays."""
        widget, self.widget = self.widget, None
        return widget
