"""A goal's state: the fold of its events on the goal's own session, and the report a face tool returns.

A goal is never kept anywhere but in the events of its session (:mod:`orchestrator.events_long`):
:class:`~orchestrator.events_long.GoalStarted`, one :class:`~orchestrator.events_long.GoalSessionStarted` per work
session (a checkpoint between sessions), one :class:`~orchestrator.events_long.GoalVerdict` per grading and a
:class:`~orchestrator.events_long.GoalFinished`. :class:`GoalState` is their fold, so a restarted controller acts on
exactly what was recorded; :func:`report` turns it into the face's :class:`~orchestrator.protocol_long.GoalReport`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from orchestrator.events import Event
from orchestrator.events_long import (
    CriterionVerdict,
    GoalFinished,
    GoalSessionStarted,
    GoalSpent,
    GoalStarted,
    GoalVerdict,
)
from orchestrator.protocol_long import GoalAttempt, GoalReport

__all__ = ["Attempt", "GoalState", "findings_of", "fold", "goal_ids", "left_criteria", "report"]


@dataclass
class Attempt:
    """One work session toward the goal, and its verdict once graded."""

    started: GoalSessionStarted
    verdict: GoalVerdict | None = None


@dataclass
class GoalState:
    """Where a goal is, as its events left it."""

    started: GoalStarted
    attempts: list[Attempt] = field(default_factory=list[Attempt])
    finished: GoalFinished | None = None
    spent: GoalSpent = field(default_factory=GoalSpent)

    @property
    def goal_id(self) -> str:
        """The goal's id."""
        return self.started.goal_id

    @property
    def session_id(self) -> str:
        """The goal's own session."""
        return self.started.session_id

    @property
    def last(self) -> Attempt | None:
        """The newest attempt, if any."""
        return self.attempts[-1] if self.attempts else None

    @property
    def last_verdict(self) -> GoalVerdict | None:
        """The newest verdict, if any attempt was graded."""
        return next((a.verdict for a in reversed(self.attempts) if a.verdict is not None), None)

    def apply(self, event: Event) -> None:
        """Fold one event of this goal in (others are ignored)."""
        if getattr(event, "goal_id", None) != self.goal_id:
            return
        if isinstance(event, GoalSessionStarted):
            self.attempts.append(Attempt(event))
            self.spent = event.spent
        elif isinstance(event, GoalVerdict):
            for attempt in self.attempts:
                if attempt.started.attempt == event.attempt:
                    attempt.verdict = event
            self.spent = event.spent
        elif isinstance(event, GoalFinished):
            self.finished = event
            self.spent = event.spent


def goal_ids(events: Iterable[Event]) -> list[str]:
    """The goals started in these events, oldest first."""
    return [event.goal_id for event in events if isinstance(event, GoalStarted)]


def fold(events: Iterable[Event], goal_id: str) -> GoalState:
    """The state of goal ``goal_id`` from its session's events (in ``seq`` order).

    Raises:
        KeyError: No such goal in these events.
    """
    state: GoalState | None = None
    for event in events:
        if state is None:
            if isinstance(event, GoalStarted) and event.goal_id == goal_id:
                state = GoalState(event)
            continue
        state.apply(event)
    if state is None:
        raise KeyError(goal_id)
    return state


def left_criteria(state: GoalState) -> list[str]:
    """The criteria not met yet, each with the grader's last reason (all of them before any verdict)."""
    verdict = state.last_verdict
    if verdict is None:
        return [f"{c} - not judged yet" for c in state.started.criteria]
    return [f"{v.criterion} - {v.reason}" for v in verdict.criteria if not v.passed]


def findings_of(verdicts: Iterable[CriterionVerdict]) -> str:
    """The findings a failed verdict hands the next session: each failed criterion and why."""
    return "\n".join(f"- {v.criterion}: {v.reason}" for v in verdicts if not v.passed)


def report(state: GoalState) -> GoalReport:
    """The goal's snapshot as the face returns it."""
    status = state.finished.status if state.finished is not None else "running"
    reason = state.finished.reason if state.finished is not None else ""
    attempts = [
        GoalAttempt(
            attempt=a.started.attempt,
            session_id=a.started.child_session_id,
            grader_session_id=a.verdict.grader_session_id if a.verdict is not None else "",
            passed=a.verdict.passed if a.verdict is not None else None,
            criteria=list(a.verdict.criteria) if a.verdict is not None else [],
            findings=a.verdict.findings if a.verdict is not None else "",
            handoff_from=a.started.handoff_from,
        )
        for a in state.attempts
    ]
    return GoalReport(
        goal_id=state.goal_id,
        session_id=state.session_id,
        goal=state.started.goal,
        criteria=list(state.started.criteria),
        budget=state.started.budget,
        spent=state.spent,
        status=status,
        reason=reason,
        attempts=attempts,
        left=list(state.finished.left) if state.finished is not None else [],
    )
