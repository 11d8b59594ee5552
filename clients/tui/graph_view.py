"""An orchestration's task graph in the conversation, live: each task's state, attempts and dependencies.

Built only from the orchestrating session's events (``orchestration_started``, ``task_graph_planning``,
``task_graph_planned``, ``task_state_changed``, ``orchestration_finished``), folded here the way the face folds
them for ``get_orchestration``: an orchestration started by ``/orchestrate``, by ``loom orchestrate`` or by another
agent shows the same, live or read back. When it ends, the block is its report: the outcome, and under each task
that did not pass why, with the reviewer's findings. The planner, the executors and the reviewers are children of
the session, so each also has its own child block (with its clock and current tool) below.

Every text here came from a model (the planner writes the titles, the reviewer the findings) and is cut to one
safe line before it is drawn.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from rich.text import Text
from textual.widgets import Static

from clients.timeline import first_line
from clients.tui.entry import Entry
from orchestrator.events import (
    OrchestrationFinished,
    OrchestrationStarted,
    TaskGraphPlanned,
    TaskGraphPlanning,
    TaskStateChanged,
)

__all__ = ["GraphBlock", "GraphEvent", "Graphs", "TaskGraph", "TaskRow", "mark"]

GraphEvent = OrchestrationStarted | TaskGraphPlanning | TaskGraphPlanned | TaskStateChanged | OrchestrationFinished

MAX_FINDINGS = 5
"""Findings shown under a task that did not pass (the reviewer's session has them all)."""
_ID_WIDTH = 16

_MARK = {
    "pending": ("·", "dim"),
    "ready": ("○", ""),
    "running": ("●", "cyan"),
    "reviewing": ("◆", "magenta"),
    "passed": ("✓", "green"),
    "failed": ("✗", "bold red"),
    "blocked": ("⊘", "yellow"),
    "cancelled": ("-", "yellow"),
}
_OUTCOME = {"passed": "bold green", "failed": "bold red", "cancelled": "bold yellow"}


def mark(state: str) -> tuple[str, str]:
    """A task state's mark and its style (``✓``, green for ``passed``)."""
    return _MARK.get(state, ("?", ""))


@dataclass
class TaskRow:
    """One task as its events left it."""

    id: str
    title: str = ""
    depends_on: list[str] = field(default_factory=list[str])
    state: str = "pending"
    attempt: int = 0
    reason: str = ""
    findings: list[str] = field(default_factory=list[str])


@dataclass
class TaskGraph:
    """An orchestration folded from its events: its goal, where it is and each task.

    No widget: the conversation's block and the strip over the prompt (:mod:`clients.tui.graph_strip`) draw it.
    """

    orchestration_id: str
    goal: str = ""
    max_attempts: int = 0
    status: str = "planning"
    """``planning``, ``running``, then ``passed``, ``failed`` or ``cancelled``."""
    reason: str = ""
    planner_attempt: int = 0
    problem: str = ""
    """What was wrong with the planner's previous answer (it is asked again)."""
    tasks: dict[str, TaskRow] = field(default_factory=dict[str, TaskRow])
    """Tasks in the planner's order."""

    @property
    def ended(self) -> bool:
        """It passed, failed or was cancelled."""
        return self.status in _OUTCOME

    def apply(self, event: GraphEvent) -> None:
        """Fold one of the orchestration's events in."""
        if isinstance(event, OrchestrationStarted):
            self.goal, self.max_attempts = event.goal, event.max_attempts
        elif isinstance(event, TaskGraphPlanning):
            self.planner_attempt, self.problem = event.attempt, event.problem
        elif isinstance(event, TaskGraphPlanned):
            self.tasks = {t.id: TaskRow(t.id, t.title, list(t.depends_on)) for t in event.tasks}
            if self.status == "planning":
                self.status = "running"
        elif isinstance(event, TaskStateChanged):
            # Shown from the middle (its plan not read): the task still gets its line, named by its id.
            row = self.tasks.setdefault(event.task_id, TaskRow(event.task_id))
            row.state, row.attempt, row.reason = event.state, event.attempt, event.reason
            if event.state == "ready" or event.findings:
                row.findings = list(event.findings)
            if self.status == "planning":
                self.status = "running"
        else:
            self.status, self.reason = event.status, event.reason

    def summary(self) -> str:
        """``running · 1/4 passed`` (just the status before the graph is planned)."""
        if not self.tasks:
            return self.status
        passed = sum(row.state == "passed" for row in self.tasks.values())
        return f"{self.status} · {passed}/{len(self.tasks)} passed"


class GraphBlock(Static):
    """One orchestration: its goal, where it is, and a line per task (state, attempts, what it waits for)."""

    DEFAULT_CSS = """
    GraphBlock {
        padding: 0 1;
        border-left: thick $accent;
    }
    GraphBlock.-passed {
        border-left: thick $success;
    }
    GraphBlock.-failed {
        border-left: thick $error;
    }
    GraphBlock.-cancelled {
        border-left: thick $warning;
    }
    """

    def __init__(self, orchestration_id: str) -> None:
        super().__init__()
        self.graph = TaskGraph(orchestration_id)
        self._refresh_content()

    @property
    def status(self) -> str:
        """``planning``, ``running``, then ``passed``, ``failed`` or ``cancelled``."""
        return self.graph.status

    @property
    def tasks(self) -> dict[str, TaskRow]:
        """The tasks, in the planner's order."""
        return self.graph.tasks

    @property
    def text(self) -> str:
        """What the block says now, as plain text."""
        return self._content().plain

    def apply(self, event: GraphEvent) -> None:
        """Fold one of the orchestration's events in and redraw."""
        self.graph.apply(event)
        if self.graph.ended:
            self.set_class(True, f"-{self.graph.status}")
        self._refresh_content()

    def _refresh_content(self) -> None:
        self.update(self._content())

    def _content(self) -> Text:
        g = self.graph
        line = Text("» orchestration ", style="bold")
        line.append(g.orchestration_id, style="bold")
        line.append(f"  [{g.summary()}]", style=_OUTCOME.get(g.status, "cyan"))
        if g.goal:
            line.append(f"\n{first_line(g.goal, 200)}", style="italic")
        if g.status == "planning":
            attempt = f" (attempt {g.planner_attempt})" if g.planner_attempt > 1 else ""
            line.append(f"\nthe planner writes the task graph{attempt}…", style="dim")
            if g.problem:
                line.append(f"\nits last answer: {first_line(g.problem, 200)}", style="yellow")
        width = min(_ID_WIDTH, max((len(t) for t in g.tasks), default=0))
        for row in g.tasks.values():
            self._task_line(line, row, width)
        if g.reason and g.status in _OUTCOME:
            line.append(f"\n{first_line(g.reason, 300)}", style=_OUTCOME[g.status].removeprefix("bold "))
        return line

    def _task_line(self, line: Text, row: TaskRow, width: int) -> None:
        symbol, style = mark(row.state)
        line.append(f"\n{symbol} ", style=style)
        line.append(first_line(row.id, _ID_WIDTH).ljust(width), style="bold")
        line.append(f" {row.state:<9}", style=style)
        if row.attempt:
            bound = f"/{self.graph.max_attempts}" if self.graph.max_attempts else ""
            line.append(f" attempt {row.attempt}{bound}", style="dim")
        line.append(f" {first_line(row.title, 120)}" if row.title else "")
        if row.depends_on:
            after = ", ".join(first_line(d, _ID_WIDTH) for d in row.depends_on[:6])
            line.append(f" ← {after}{', …' if len(row.depends_on) > 6 else ''}", style="dim")
        if row.state in ("failed", "blocked") or (row.state == "ready" and row.findings):
            if row.reason:
                line.append(f"\n    {first_line(row.reason, 200)}", style=style if row.state != "ready" else "dim")
            for finding in row.findings[:MAX_FINDINGS]:
                line.append(f"\n    * {first_line(finding, 200)}", style="dim")
            if len(row.findings) > MAX_FINDINGS:
                line.append(f"\n    … {len(row.findings) - MAX_FINDINGS} more findings", style="dim")


class Graphs:
    """The conversation's graph blocks, by orchestration id."""

    def __init__(self) -> None:
        self._blocks: dict[str, Entry[GraphBlock]] = {}

    def block(self, orchestration_id: str) -> Entry[GraphBlock] | None:
        """The record of an orchestration's block."""
        return self._blocks.get(orchestration_id)

    def show(self, event: GraphEvent, add: Callable[[Entry[GraphBlock]], None]) -> None:
        """Change the orchestration's block (``add`` puts a new one in the conversation)."""
        oid = event.orchestration_id
        entry = self._blocks.get(oid)
        if entry is None:  # its start is before what this view read: the block starts here
            entry = self._blocks[oid] = Entry(lambda: GraphBlock(oid))
            add(entry)
        entry.change(lambda w: w.apply(event))

    def put_older(self, older: Graphs) -> None:
        """Take in the records of older history (rendered apart), keeping this one's where both know one."""
        self._blocks = {**older._blocks, **self._blocks}
