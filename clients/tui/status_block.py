"""A block of the conversation whose status is also a CSS class, so that the stylesheet colours it by status."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

__all__ = ["StatusBlock"]


class StatusBlock(Static):
    """A block with a ``status`` (``running``, ``completed``, ``awaiting approval``...) shown as class ``-running``.

    Subclasses set ``status`` and ``_status_class`` before mounting and draw themselves in :meth:`_content`.
    """

    status: str
    _status_class: str

    def _set_status(self, status: str) -> None:
        self.status = status
        if self.is_mounted:  # a block built from history gets its class once, when mounted (a class costs ~1 ms)
            self._show_status_class()

    def _show_status_class(self) -> None:
        wanted = "-" + self.status.replace(" ", "-")
        if wanted != self._status_class:
            self.remove_class(self._status_class)
            self.add_class(wanted)
            self._status_class = wanted

    def _refresh_content(self) -> None:
        self.update(self._content())

    def _content(self) -> Text:
        raise NotImplementedError
