"""The face's results for long work: goals and handoffs.

The tools: ``start_goal``, ``get_goal``, ``list_goals``, ``cancel_goal``, ``handoff_session``, ``get_handoff``,
``archive_memory``.

Part of the face's protocol like :mod:`orchestrator.protocol` (``docs/protocol.md`` lists them), kept in a
module of its own. Only pydantic and the event vocabulary are imported, so a client pays for nothing else.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from orchestrator.events_long import CriterionVerdict, GoalBudget, GoalSpent, GoalStatus

__all__ = ["GoalAttempt", "GoalList", "GoalReport", "HandoffReport", "MemoryArchiveInfo"]


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


class MemoryArchiveInfo(BaseModel):
    """What promoting a session's notes (its ``session`` memory namespace) to the project namespace did."""

    session_id: str
    from_namespace: str = "session"
    to_namespace: str = "project"
    keys: list[str] = Field(default_factory=list[str])
    """The project keys the session's notes now have (a renamed note under its new key)."""
    renamed: dict[str, str] = Field(default_factory=dict[str, str])
    """Session key -> project key, where the project already had a different note under the session's key (kept)."""
    unchanged: list[str] = Field(default_factory=list[str])
    """Session keys whose note the project already had word for word."""
    skipped: list[str] = Field(default_factory=list[str])
    """``key: why`` for notes that could not be promoted."""


class HandoffReport(BaseModel):
    """A session's handoff and the fresh session that continues from it."""

    session_id: str
    """The session that wrote the handoff (archived once the fresh one exists)."""
    new_session_id: str
    text: str
    instructions: list[str] = Field(default_factory=list[str])
    """The user's instructions, carried verbatim."""
    archived: bool = True
    extra: str = ""
    """What the person asked the fresh session besides (``handoff_session``'s ``instructions``), verbatim."""
    trigger: str = "manual"
    """``manual`` (a person or a client asked) or ``goal`` (a goal's session passed its watermark)."""
    attempts: int = 1
    """How many times the model was asked for the handoff."""
    memory: MemoryArchiveInfo | None = None
    """The session's notes promoted to the project at the handoff (None: kept in the session, or none asked)."""
    memory_error: str = ""
    """Why promoting the notes failed, if it did (the handoff itself stands)."""
