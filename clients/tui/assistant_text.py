"""The assistant's text for one model step, streamed as it is written and shown as Markdown.

The Markdown is rendered by Rich into styled text lines at the widget's width, and the widget shows those lines
as text: one widget per step, with no child widget per paragraph, list item or code block. That keeps a block
cheap to mount (Textual's ``Markdown`` widget composes a widget per Markdown block, tens of milliseconds for a
short answer, which made a long session slow to open and to scroll), and the text stays selectable and
copyable. While the step streams, deltas only grow the source and ask for a refresh: Textual paints at most
once a frame, so a burst of deltas is rendered once (the compositor sends only the changed cells to the
terminal, so it does not flicker). A long text is rendered paragraph by paragraph while it streams, each
finished paragraph once, so a frame costs the same at the end of a long answer as at its start.
"""

from __future__ import annotations

import anyio
from rich.markdown import Markdown
from rich.text import Text
from textual.geometry import Size
from textual.widget import Widget

__all__ = ["AssistantText"]

STREAM_WHOLE_CHARS = 2_000
"""A streaming text shorter than this is rendered whole each frame; a longer one paragraph by paragraph."""


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
        self._rendered: tuple[str, int, bool, bool, Text] | None = None
        """(source, width, dark theme, rendered whole, the lines) of the last rendering."""
        self._pieces_key: tuple[int, bool] | None = None
        self._pieces_end = 0
        self._pieces = Text()
        """While a long text streams: its finished paragraphs (up to ``_pieces_end``), rendered at a width."""
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
        whole = self.settled.is_set() or len(self._source) < STREAM_WHOLE_CHARS
        cached = self._rendered
        if cached is not None and cached[:4] == (self._source, width, dark, whole):
            return cached[4]
        text = self._markdown(self._source, width, dark) if whole else self._streaming(width, dark)
        self._rendered = (self._source, width, dark, whole, text)
        return text

    def _streaming(self, width: int, dark: bool) -> Text:
        """A long text still streaming: its finished paragraphs rendered once each, only the last one again.

        The stored text, once it comes, is rendered whole (a paragraph break inside a list or a quote renders a
        little differently in pieces), so what stays on screen is exact.
        """
        if self._pieces_key != (width, dark):
            self._pieces_key, self._pieces_end, self._pieces = (width, dark), 0, Text()
        split = _stable_end(self._source)
        if split > self._pieces_end:
            done = self._markdown(self._source[self._pieces_end : split], width, dark)
            if self._pieces.plain and done.plain:
                self._pieces.append("\n\n")
            self._pieces.append_text(done)
            self._pieces_end = split
        text = self._pieces.copy()
        tail = self._markdown(self._source[self._pieces_end :], width, dark)
        if text.plain and tail.plain:
            text.append("\n\n")
        text.append_text(tail)
        return text

    def _markdown(self, source: str, width: int, dark: bool) -> Text:
        """``source`` rendered by Rich at ``width``, as styled text lines."""
        source = source.strip("\n")
        if not source:
            return Text()
        console = self.app.console
        markdown = Markdown(source, code_theme="monokai" if dark else "default", hyperlinks=False)
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
        return text


def _stable_end(source: str) -> int:
    """Where the finished paragraphs of a streaming text end: its last blank line outside a code fence."""
    end = source.rfind("\n\n")
    while end > 0 and source.count("```", 0, end) % 2:
        end = source.rfind("\n\n", 0, end)
    return max(end, 0)
