"""An orchestration's bounds, and the error for one that cannot be started or resumed as asked."""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.agents.graph import MAX_TASKS

__all__ = ["Limits", "OrchestrationError"]


@dataclass(frozen=True, slots=True)
class Limits:
    """How an orchestration is bounded.

    Attributes:
        max_parallel: Tasks with a child going at once (an executor or its reviewer), at most.
        task_timeout_s: Each executor's and reviewer's run is cancelled past this; the planner's too.
        max_attempts: Executor attempts per task; a failed review or run re-queues the task until then.
        max_tasks: The most tasks a planned graph may have.
        plan_attempts: Planner children asked for a graph (the second is told what was wrong with the first).
        wait_grace_s: How long past a child's own deadline the controller waits before cancelling it itself.
    """

    max_parallel: int = 4
    task_timeout_s: float = 900.0
    max_attempts: int = 3
    max_tasks: int = MAX_TASKS
    plan_attempts: int = 2
    wait_grace_s: float = 30.0

    def __post_init__(self) -> None:
        problems = [
            f"{name} must be at least {low}, not {value}"
            for name, value, low in (
                ("max_parallel", self.max_parallel, 1),
                ("max_attempts", self.max_attempts, 1),
                ("max_tasks", self.max_tasks, 1),
                ("plan_attempts", self.plan_attempts, 1),
            )
            if value < low
        ]
        if not self.task_timeout_s > 0:
            problems.append(f"task_timeout_s must be more than 0, not {self.task_timeout_s}")
        if problems:
            raise OrchestrationError("; ".join(problems))


class OrchestrationError(ValueError):
    """An orchestration cannot be started or resumed as asked; the message says why."""
