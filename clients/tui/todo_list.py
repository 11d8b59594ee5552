"""The session's plan as a checklist over the prompt: what the model means to do, and where it is.

The model writes and marks its plan with its ``todo`` tool; each change is a ``todo_updated`` event carrying the
whole list, and ``get_session`` has the list as it stands (``todos``), for a session opened at its end or after a
reconnection (its last update may be in history not read). The stream wins: once an update has come on it, what
``get_session`` said earlier is out of date.

The list is drawn in at most :data:`MOST_LINES` lines under its heading whatever its length, always with the item
in progress in view (the heading counts the items left out above and below); items are marked ``[x]`` done,
``[>]`` in progress, ``[ ]`` pending (readable without colour). Hidden while the session has no plan. Every text
came from a model: each item is cut to one safe line.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.widgets import Static

from clients.long_work_lines import TODO_MARKS, todo_summary
from clients.timeline import first_line
from orchestrator.events_long import TodoItem, TodoUpdated

__all__ = ["MOST_LINES", "TodoList", "visible_items"]

MOST_LINES = 5
"""Items drawn at most, under the heading (which says how many are left out above and below)."""
_WIDTH = 160

_STYLE = {"pending": "", "in_progress": "bold cyan", "completed": "dim green"}


def visible_items(items: Sequence[TodoItem], most: int = MOST_LINES) -> tuple[int, int]:
    """Which items to draw, ``(first, end)``: the in-progress one in view, with the items just before it.

    With no item in progress, the first pending one leads (what comes next); a plan all done shows its end.
    """
    if len(items) <= most:
        return 0, len(items)
    focus = next((n for n, i in enumerate(items) if i.status == "in_progress"), None)
    if focus is None:
        focus = next((n for n, i in enumerate(items) if i.status == "pending"), len(items) - 1)
    first = max(0, min(focus - 1, len(items) - most))  # one done item above gives the step its context
    return first, first + most


class TodoList(Static):
    """The shown session's plan, as a checklist of bounded height; hidden when there is none."""

    DEFAULT_CSS = """
    TodoList {
        height: auto;
        max-height: 6;
        padding: 0 1;
        border-left: thick $accent;
        display: none;
    }
    """

    def __init__(self) -> None:
        super().__init__()
        self.items: list[TodoItem] = []
        """The plan as it stands."""
        self._from_stream = False
        """An update came on the stream: a ``get_session`` answer (maybe older) no longer replaces it."""

    @property
    def text(self) -> str:
        """What the checklist says (empty when hidden)."""
        return self._content().plain if self.items else ""

    def observe(self, event: object) -> None:
        """Take the plan from ``event`` if it is a ``todo_updated`` (called for every event shown)."""
        if isinstance(event, TodoUpdated):
            self._from_stream = True
            self._show(event.items)

    def show_plan(self, items: Sequence[TodoItem]) -> None:
        """The plan ``get_session`` reported (ignored once the stream has said newer)."""
        if not self._from_stream:
            self._show(items)

    def reset(self) -> None:
        """Forget the plan (another session is shown)."""
        self._from_stream = False
        self._show([])

    def _show(self, items: Sequence[TodoItem]) -> None:
        self.items = list(items)
        self.display = bool(self.items)
        if self.items:
            self.update(self._content())

    def _content(self) -> Text:
        items = self.items
        line = Text(todo_summary(items).split(";")[0], style="bold")
        if all(i.status == "completed" for i in items):
            line.append("  ✓ all done", style="green")
            return line  # a finished plan keeps one line: the conversation needs the room
        first, end = visible_items(items)
        hidden = [f"{first} above"] if first else []
        hidden += [f"{len(items) - end} below"] if end < len(items) else []
        if hidden:
            line.append(f"  (… {', '.join(hidden)})", style="dim")
        for item in items[first:end]:
            style = _STYLE.get(item.status, "")
            line.append(f"\n{TODO_MARKS.get(item.status, '[?]')} ", style=style)
            line.append(first_line(item.text, _WIDTH) or "(empty)", style=style)
        return line
