"""The assistant's text for one model step, streamed as it is written and shown as Markdown.

The Markdown is rendered by Rich into styled text lines at the widget's width, and the widget shows those lines
as text: one widget per step, with no child widget per paragraph, list item or code block. That keeps a block
cheap to mount (Textual's ``Markdown`` widget composes a widget per Markdown block, tens of milliseconds for a
short answer, which made a long session slow to open and to scroll), and the text stays selectable and
copyable. While the step streams, deltas only grow the source and ask for a refresh: Textual paints at most
once a frame, so a burst of deltas is rendered once, and the whole block is painted anew each time (the
compositor sends only the changed cells to the terminal, so it does not flicker).
"""

from __future__ import annotations

import anyio
from rich.markdown import Markdown
from rich.text import Text
from textual.geometry import Size
from textual.widget import Widget

__all__ = ["AssistantText"]


class AssistantText(Widget):
    """The text of one step (``run_id``, ``step``); :meth:`finish` makes it the stored text exactly."""

    DEFAULT_CSS = """
    AssistantText {
        height: auto;
    }
    """

    def __init__(self, *, run_id: str, step: int, text: str = "") -> None:
        super().__init__()
        self.run_id = run_id
        self.step = step
        self._source = text
        self._rendered: tuple[str, int, bool, Text] | None = None
        """(source, width, dark theme, the lines) of the last rendering."""
        self.settled = anyio.Event()
        """Set once the stored text is shown (tests wait on it)."""

    def feed(self, text: str) -> None:
        """Add streamed text."""
        self._source += text
        self.refresh(layout=True)

    def finish(self, text: str) -> None:
        """The step's stored text: shown exactly, whatever was streamed."""
        self._source = text
        self.settled.set()
        self.refresh(layout=True)

    @property
    def source(self) -> str:
        """The Markdown source shown."""
        return self._source

    @property
    def shown(self) -> str:
        """The Markdown source shown (kept for callers of the streaming widget this replaced)."""
        return self._source

    @property
    def rendered_source(self) -> str:
        """The source as last rendered for the screen (behind :attr:`source` until the next frame)."""
        return self._rendered[0] if self._rendered is not None else ""

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        """As many lines as the Markdown takes at ``width``."""
        return len(self._lines(width).plain.split("\n")) if self._source else 0

    def render(self) -> Text:
        """The Markdown, rendered at the widget's width."""
        return self._lines(self.content_size.width)

    def _lines(self, width: int) -> Text:
        width = max(width, 10)
        dark = self.app.current_theme.dark if self.is_attached else True
        cached = self._rendered
        if cached is not None and cached[:3] == (self._source, width, dark):
            return cached[3]
        console = self.app.console
        markdown = Markdown(self._source, code_theme="monokai" if dark else "default", hyperlinks=False)
        lines = console.render_lines(markdown, console.options.update(width=width, height=None), pad=False)
        rows: list[Text] = []
        for line in lines:
            row = Text()
            for segment in line:
                if not segment.control:
                    row.append(segment.text, segment.style)
            row.rstrip()  # Rich pads lines to the width; the widget's own width does that
            rows.append(row)
        text = Text("\n").join(rows)
        text.rstrip()
        self._rendered = (self._source, width, dark, text)
        return text
