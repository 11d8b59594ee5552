"""A line over the prompt while an orchestration goes: its tasks' states, wherever the conversation is scrolled.

The graph's block (:mod:`clients.tui.graph_view`) stays where the orchestration started, and its children's
blocks pile up under it; this strip keeps the shown session's newest unfinished orchestration in view — its id,
``running · 1/4 passed`` and a mark per task — and hides once it ends (the block has the report). Fed the same
events as the conversation, so it holds nothing the daemon did not say.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from clients.timeline import first_line
from clients.tui.graph_view import GraphEvent, TaskGraph, mark

__all__ = ["GraphStrip"]


class GraphStrip(Static):
    """The newest orchestration still going in the shown session, on at most two lines; hidden when none."""

    DEFAULT_CSS = """
    GraphStrip {
        height: auto;
        max-height: 2;
        padding: 0 1;
        background: $boost;
        display: none;
    }
    """

    def __init__(self) -> None:
        super().__init__()
        self._graphs: dict[str, TaskGraph] = {}

    @property
    def text(self) -> str:
        """What the strip says (empty when hidden)."""
        going = self._going()
        return self._content(going).plain if going is not None else ""

    def observe(self, event: object) -> None:
        """Fold ``event`` in if it is one of an orchestration's (called for every event shown)."""
        if not isinstance(event, GraphEvent):
            return
        graph = self._graphs.get(event.orchestration_id)
        if graph is None:
            graph = self._graphs[event.orchestration_id] = TaskGraph(event.orchestration_id)
        graph.apply(event)
        self._redraw()

    def reset(self) -> None:
        """Forget every orchestration (another session is shown)."""
        self._graphs.clear()
        self._redraw()

    def _going(self) -> TaskGraph | None:
        return next((g for g in reversed(self._graphs.values()) if not g.ended), None)

    def _redraw(self) -> None:
        going = self._going()
        self.display = going is not None
        if going is not None:
            self.update(self._content(going))

    def _content(self, graph: TaskGraph) -> Text:
        line = Text(f"orchestration {graph.orchestration_id} ", style="bold")
        line.append(graph.summary(), style="cyan")
        for row in graph.tasks.values():
            symbol, style = mark(row.state)
            line.append(f"  {symbol} ", style=style)
            line.append(first_line(row.id, 16))
        line.append("  (/orchestrate cancel ends it)", style="dim")
        return line
