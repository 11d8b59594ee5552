"""An orchestration's snapshot and outcome: what a face tool returns and what ``loom orchestrate`` prints.

:func:`report` turns a :class:`~orchestrator.agents.graph.GraphState` (the fold of the events) into a
:class:`Report`, a pydantic model a face tool can return as its structured result, while the orchestration runs
(``status`` ``planning`` or ``running``) and once it ended; :meth:`Report.text` is the same for a person or a
model, and :func:`snapshot` reads it from a session's events. :func:`unfinished` finds the orchestrations of a
session that a restart should resume.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pydantic import BaseModel, Field

from orchestrator.agents.graph import GraphState, fold, orchestrations
from orchestrator.events import Event, OrchestrationFinished, OrchestrationStarted, TaskState

__all__ = ["Report", "TaskReport", "report", "snapshot", "summary", "unfinished"]


class TaskReport(BaseModel):
    """One task as the graph's events left it."""

    id: str
    title: str
    state: TaskState
    depends_on: list[str] = Field(default_factory=list)
    attempts: int = 0
    """Executor attempts made."""
    reason: str = ""
    findings: list[str] = Field(default_factory=list)
    """The latest review's findings."""
    result: str = ""
    """The executor's latest answer (cut)."""
    child_session_id: str = ""
    """The latest executor or reviewer child: ``loom attach`` it to see its work."""


class Report(BaseModel):
    """An orchestration: where it is (or how it ended) and each of its tasks."""

    orchestration_id: str
    goal: str
    status: str
    """``planning``, ``running``, or the final ``passed``, ``failed``, ``cancelled``."""
    reason: str = ""
    counts: dict[str, int] = Field(default_factory=dict)
    """Tasks per state."""
    tasks: list[TaskReport] = Field(default_factory=list)

    def text(self) -> str:
        """The report as lines of text: the status, then one line per task (with findings under failed ones)."""
        head = f"orchestration {self.orchestration_id}: {self.status}" + (f" - {self.reason}" if self.reason else "")
        lines = [head]
        for task in self.tasks:
            after = f" (after {', '.join(task.depends_on)})" if task.depends_on else ""
            tries = f", {task.attempts} attempt{'s' if task.attempts != 1 else ''}" if task.attempts else ""
            lines.append(f"- [{task.state}] {task.id}: {task.title}{after}{tries}")
            if task.state in ("failed", "blocked") and task.reason:
                lines.append(f"    {task.reason}")
            if task.state == "failed":
                lines += [f"    * {finding}" for finding in task.findings[:10]]
        return "\n".join(lines)


def report(state: GraphState) -> Report:
    """The snapshot of an orchestration's state."""
    status: str = "running" if state.planned else "planning"
    reason = ""
    if state.finished is not None:
        status, reason = state.finished.status, state.finished.reason
    return Report(
        orchestration_id=state.orchestration_id,
        goal=state.started.goal,
        status=status,
        reason=reason,
        counts=state.counts(),
        tasks=[
            TaskReport(
                id=tid,
                title=task.spec.title,
                state=task.state,
                depends_on=list(task.spec.depends_on),
                attempts=task.attempt,
                reason=task.reason,
                findings=list(task.findings),
                result=task.result,
                child_session_id=task.child_session_id,
            )
            for tid, task in state.tasks.items()
        ],
    )


def snapshot(events: Sequence[Event], orchestration_id: str | None = None) -> Report | None:
    """The report of an orchestration from a session's events (the newest one by default), or None if none."""
    if orchestration_id is None:
        started = orchestrations(events)
        if not started:
            return None
        orchestration_id = started[-1]
    try:
        return report(fold(events, orchestration_id))
    except KeyError:
        return None


def summary(state: GraphState) -> str:
    """One line for a finished graph: ``all 3 tasks passed``, or how many passed and which did not."""
    counts = state.counts()
    total = len(state.tasks)
    if counts.get("passed", 0) == total:
        return f"all {total} task{'s' if total != 1 else ''} passed"
    parts = []
    for name in ("failed", "blocked", "cancelled"):
        ids = [tid for tid, task in state.tasks.items() if task.state == name]
        if ids:
            parts.append(f"{len(ids)} {name} ({', '.join(ids[:10])}{', ...' if len(ids) > 10 else ''})")
    return f"{counts.get('passed', 0)} of {total} tasks passed; " + ", ".join(parts)


def unfinished(events: Iterable[Event]) -> list[str]:
    """Ids of the orchestrations in these events that started and never finished, oldest first."""
    started: list[str] = []
    ended: set[str] = set()
    for event in events:
        if isinstance(event, OrchestrationStarted):
            started.append(event.orchestration_id)
        elif isinstance(event, OrchestrationFinished):
            ended.add(event.orchestration_id)
    return [oid for oid in started if oid not in ended]
