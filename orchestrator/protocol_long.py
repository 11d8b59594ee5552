"""The face's results for long work: goals and handoffs.

The tools: ``start_goal``, ``get_goal``, ``list_goals``, ``cancel_goal``, ``handoff_session``, ``get_handoff``.

Part of the face's protocol like :mod:`orchestrator.protocol` (``docs/protocol.md`` lists them), kept in a
module of its own. Only pydantic and the event vocabulary are imported, so a client pays for nothing else.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from orchestrator.events_long import CriterionVerdict, GoalBudget, GoalSpent, GoalStatus

__all__ = ["GoalAttempt", "GoalList", "GoalReport", "HandoffReport"]


class GoalAttempt(BaseModel):
    """One work session toward a goal and the grader's verdict on it."""

    attempt: int
    session_id: str
    """The work session (a child of the goal's session)."""
    grader_session_id: str = ""
    """The grader child that judged it; empty until it has."""
    passed: bool | None = None
    """None while the work session runs or is being graded."""
    criteria: list[CriterionVerdict] = Field(default_factory=list[CriterionVerdict])
    findings: str = ""
    handoff_from: str = ""


class GoalReport(BaseModel):
    """Where a goal stands."""

    goal_id: str
    session_id: str
    """The goal's own session: its events are the goal's record, its children the work and grader sessions."""
    goal: str
    criteria: list[str]
    budget: GoalBudget
    spent: GoalSpent
    status: GoalStatus
    reason: str = ""
    attempts: list[GoalAttempt] = Field(default_factory=list[GoalAttempt])
    left: list[str] = Field(default_factory=list[str])
    """The criteria not met yet (with the last reason), once the goal failed or was cancelled."""


class GoalList(BaseModel):
    """Goals, newest first."""

    goals: list[GoalReport]


class HandoffReport(BaseModel):
    """A session's handoff and the fresh session that continues from it."""

    session_id: str
    """The session that wrote the handoff (archived once the fresh one exists)."""
    new_session_id: str
    text: str
    instructions: list[str] = Field(default_factory=list[str])
    """The user's instructions, carried verbatim."""
    archived: bool = True
