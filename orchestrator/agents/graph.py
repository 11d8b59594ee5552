"""An orchestration's task graph: validating a planner's tasks, folding the graph's events into its state.

A graph is a list of :class:`~orchestrator.events.PlannedTask`: an id, a title, a brief (the executor's whole
context), the ids it depends on and the acceptance criteria a reviewer checks. :func:`validate_tasks` refuses a
graph the controller could not run (no tasks, too many, duplicate or unsafe ids, an unknown dependency, a cycle,
a task with no criteria), naming every problem in the planner's terms, so that the planner can be told what to
fix. The planner is a model and treated as hostile: every text is bounded and free of control characters.

The graph's state is never kept anywhere but in events (:mod:`orchestrator.events`): :class:`GraphState` is the
fold of an orchestration's :class:`~orchestrator.events.OrchestrationStarted`,
:class:`~orchestrator.events.TaskGraphPlanning`, :class:`~orchestrator.events.TaskGraphPlanned`,
:class:`~orchestrator.events.TaskStateChanged` and :class:`~orchestrator.events.OrchestrationFinished` events,
so a restarted controller rebuilds exactly what was recorded (:func:`fold`). Above sits the controller
(:mod:`orchestrator.agents.orchestrate`); below, only the event models.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from orchestrator.events import (
    Event,
    OrchestrationFinished,
    OrchestrationStarted,
    OrchestrationStatus,
    PlannedTask,
    TaskGraphPlanned,
    TaskGraphPlanning,
    TaskState,
    TaskStateChanged,
)

__all__ = [
    "FINAL_STATES",
    "MAX_TASKS",
    "TASK_ID_PATTERN",
    "GraphError",
    "GraphState",
    "TaskProgress",
    "fold",
    "orchestrations",
    "validate_tasks",
]

MAX_TASKS = 50
"""Tasks a graph may have by default: each is at least two child runs, so a larger plan is a planner gone wrong."""
TASK_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
"""A task id, matched in full: ids go into briefs, events and the TUI, so they are short and plain."""
MAX_TITLE_CHARS = 200
MAX_BRIEF_CHARS = 16_000
"""A brief becomes a child's first message; the child needs room left for its work."""
MAX_CRITERIA = 20
MAX_CRITERION_CHARS = 1_000
MAX_DEPENDENCIES = 50
FINAL_STATES: frozenset[TaskState] = frozenset({"passed", "failed", "blocked", "cancelled"})
"""States a task never leaves."""
_UNFINISHED: frozenset[TaskState] = frozenset({"failed", "blocked", "cancelled"})
"""Final states that block a task's dependants."""


class GraphError(ValueError):
    """A task graph cannot be run; the message lists every problem, each naming the task and what to fix."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(self.problems))


def _control(text: str) -> str | None:
    """The first control or invisible format character in ``text`` (tabs and newlines are fine)."""
    return next((ch for ch in text if ch not in "\t\n\r" and unicodedata.category(ch) in ("Cc", "Cf")), None)


def _text_problem(task: str, key: str, value: str, limit: int) -> str | None:
    if not value.strip():
        return f"task {task}: {key} is empty; write one"
    if len(value) > limit:
        return f"task {task}: {key} is {len(value):,} characters; at most {limit:,}"
    if (ch := _control(value)) is not None:
        return f"task {task}: {key} holds the control character U+{ord(ch):04X}; remove it"
    return None


def _task_problems(task: PlannedTask) -> list[str]:
    name = repr(task.id[:64])
    if not TASK_ID_PATTERN.fullmatch(task.id):
        return [
            f"task id {name} is not valid; use letters, digits, '_', '-' and '.', starting with a letter or digit, "
            "at most 64 characters"
        ]
    problems = [
        problem
        for key, value, limit in (("title", task.title, MAX_TITLE_CHARS), ("brief", task.brief, MAX_BRIEF_CHARS))
        if (problem := _text_problem(name, key, value, limit)) is not None
    ]
    if not task.criteria:
        problems.append(f"task {name}: no acceptance criteria; the reviewer checks each task against them")
    elif len(task.criteria) > MAX_CRITERIA:
        problems.append(f"task {name}: {len(task.criteria)} acceptance criteria; at most {MAX_CRITERIA}")
    else:
        problems += [
            problem
            for criterion in task.criteria
            if (problem := _text_problem(name, "an acceptance criterion", criterion, MAX_CRITERION_CHARS))
        ]
    if len(task.depends_on) > MAX_DEPENDENCIES:
        problems.append(f"task {name}: {len(task.depends_on)} dependencies; at most {MAX_DEPENDENCIES}")
    if task.id in task.depends_on:
        problems.append(f"task {name} depends on itself; remove it from its own depends_on")
    return problems


def _cycle(tasks: Sequence[PlannedTask]) -> list[str] | None:
    """One dependency cycle as a list of ids (first repeated at the end), or None; iterative, so depth is no risk."""
    deps = {task.id: [d for d in task.depends_on if d != task.id] for task in tasks}
    colour: dict[str, int] = dict.fromkeys(deps, 0)  # 0 unseen, 1 on the current path, 2 done
    for root in deps:
        if colour[root]:
            continue
        path: list[str] = []
        stack: list[tuple[str, int]] = [(root, 0)]
        while stack:
            node, index = stack.pop()
            if index == 0:
                colour[node] = 1
                path.append(node)
            children = [d for d in deps[node] if d in deps]
            if index < len(children):
                stack.append((node, index + 1))
                child = children[index]
                if colour[child] == 1:
                    return [*path[path.index(child) :], child]
                if colour[child] == 0:
                    stack.append((child, 0))
            else:
                colour[node] = 2
                path.pop()
    return None


def validate_tasks(tasks: Sequence[PlannedTask], *, max_tasks: int = MAX_TASKS) -> list[PlannedTask]:
    """Check that a graph can be run, and return its tasks with duplicate dependencies dropped.

    Args:
        tasks: The tasks, as the planner wrote them.
        max_tasks: The most tasks allowed.

    Raises:
        GraphError: No task, too many, an invalid or duplicate id, an empty title or brief, no criteria, an
            unknown dependency or a cycle; the message names each problem.
    """
    if not tasks:
        raise GraphError(["the graph has no tasks; write at least one"])
    if len(tasks) > max_tasks:
        raise GraphError([f"the graph has {len(tasks)} tasks; at most {max_tasks}, so merge small ones"])
    problems: list[str] = []
    seen: set[str] = set()
    for task in tasks:
        problems += _task_problems(task)
        if task.id in seen:
            problems.append(f"task id {task.id[:64]!r} is used twice; give each task its own id")
        seen.add(task.id)
    for task in tasks:
        unknown = [dep for dep in dict.fromkeys(task.depends_on) if dep not in seen]
        if unknown:
            listed = ", ".join(repr(dep[:64]) for dep in unknown[:5])
            problems.append(f"task {task.id[:64]!r} depends on {listed}, which no task has as its id")
    if not problems and (cycle := _cycle(tasks)) is not None:
        problems.append(f"the dependencies form a cycle ({' -> '.join(cycle)}); remove one of them")
    if problems:
        raise GraphError(problems[:20])
    return [task.model_copy(update={"depends_on": list(dict.fromkeys(task.depends_on))}) for task in tasks]


@dataclass
class TaskProgress:
    """Where one task is, as its events say."""

    spec: PlannedTask
    state: TaskState = "pending"
    attempt: int = 0
    """The executor attempt of the latest transition (0: none started)."""
    child_session_id: str = ""
    child_run_id: str = ""
    """The child of the latest ``running`` or ``reviewing`` transition."""
    reason: str = ""
    findings: list[str] = field(default_factory=list[str])
    """The latest review's findings (given to the next attempt)."""
    result: str = ""
    """The latest executor answer."""

    @property
    def final(self) -> bool:
        """Whether the task will not change again."""
        return self.state in FINAL_STATES


@dataclass
class GraphState:
    """An orchestration as its events say: its settings, its graph (once planned) and where each task is.

    Build it with :func:`fold`; the controller applies each event it records with :meth:`apply`, so what it
    acts on is always what a restarted controller would rebuild.
    """

    started: OrchestrationStarted
    tasks: dict[str, TaskProgress] = field(default_factory=dict[str, TaskProgress])
    """Tasks in the planner's order; empty until the graph is planned."""
    planned: bool = False
    planner: TaskGraphPlanning | None = None
    """The latest planner child started, while no graph is planned."""
    finished: OrchestrationFinished | None = None

    @property
    def orchestration_id(self) -> str:
        """The orchestration's id."""
        return self.started.orchestration_id

    def apply(self, event: Event) -> None:
        """Fold one event in; events of other orchestrations, and other types, are ignored."""
        if getattr(event, "orchestration_id", None) != self.orchestration_id:
            return
        if isinstance(event, TaskGraphPlanning):
            self.planner = event
        elif isinstance(event, TaskGraphPlanned):
            self.tasks = {task.id: TaskProgress(task) for task in event.tasks}
            self.planned = True
            self.planner = None
        elif isinstance(event, TaskStateChanged):
            task = self.tasks.get(event.task_id)
            if task is None:
                return  # a transition for no planned task: nothing to fold it into
            task.state = event.state
            task.attempt = event.attempt
            task.reason = event.reason
            if event.state in ("running", "reviewing"):
                task.child_session_id, task.child_run_id = event.child_session_id, event.child_run_id
            if event.state == "ready" or event.findings:
                task.findings = list(event.findings)
            if event.result:
                task.result = event.result
        elif isinstance(event, OrchestrationFinished):
            self.finished = event

    def ready(self) -> list[str]:
        """Ids of the tasks that may start now: ``ready`` ones, then ``pending`` ones whose dependencies passed."""
        waiting = [tid for tid, task in self.tasks.items() if task.state == "ready"]
        return waiting + [
            tid
            for tid, task in self.tasks.items()
            if task.state == "pending" and all(self.tasks[dep].state == "passed" for dep in task.spec.depends_on)
        ]

    def blocked(self) -> dict[str, str]:
        """Tasks that can never start because a dependency (or its dependency) did not pass, with the reason.

        Only unfinished tasks whose chain reaches a ``failed``, ``blocked`` or ``cancelled`` task: the rest of the
        graph goes on.
        """
        out: dict[str, str] = {}
        changed = True
        while changed:  # a graph is at most MAX_TASKS deep, so this settles quickly
            changed = False
            for tid, task in self.tasks.items():
                if tid in out or task.state not in ("pending", "ready"):
                    continue
                for dep in task.spec.depends_on:
                    state = "blocked" if dep in out else self.tasks[dep].state
                    if state in _UNFINISHED:
                        out[tid] = f"its dependency {dep!r} {'was ' if state != 'failed' else ''}{state}"
                        changed = True
                        break
        return out

    def in_flight(self) -> list[str]:
        """Ids of the tasks with a child going (``running`` or ``reviewing``)."""
        return [tid for tid, task in self.tasks.items() if task.state in ("running", "reviewing")]

    def done(self) -> bool:
        """Whether every task is final (an unplanned graph is not done)."""
        return self.planned and all(task.final for task in self.tasks.values())

    def counts(self) -> dict[str, int]:
        """Tasks per state, only the states that occur."""
        out: dict[str, int] = {}
        for task in self.tasks.values():
            out[task.state] = out.get(task.state, 0) + 1
        return out

    def outcome(self) -> OrchestrationStatus:
        """``passed`` when every task passed, ``cancelled`` when any was cancelled, else ``failed``."""
        states = {task.state for task in self.tasks.values()}
        if states <= {"passed"} and self.planned:
            return "passed"
        return "cancelled" if "cancelled" in states else "failed"


def orchestrations(events: Iterable[Event]) -> list[str]:
    """Ids of the orchestrations these events start, oldest first."""
    return [event.orchestration_id for event in events if isinstance(event, OrchestrationStarted)]


def fold(events: Iterable[Event], orchestration_id: str) -> GraphState:
    """The state of one orchestration from a session's events (any order of types, in ``seq`` order).

    Raises:
        KeyError: No ``orchestration_started`` event has that id.
    """
    state: GraphState | None = None
    for event in events:
        if state is None:
            if isinstance(event, OrchestrationStarted) and event.orchestration_id == orchestration_id:
                state = GraphState(event)
            continue
        state.apply(event)
    if state is None:
        raise KeyError(f"no orchestration {orchestration_id!r} in these events")
    return state
