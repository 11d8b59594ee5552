"""The events of long work: hooks, the model's plan, loop detection, goals, handoffs and memory carried over.

Part of the one event union (:data:`orchestrator.events.Event`, which re-exports these), kept in a module of
its own because :mod:`orchestrator.events` is long enough. See docs/long-work.md.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from orchestrator.event_base import _EventBase

__all__ = [
    "CriterionVerdict",
    "GoalBudget",
    "GoalFinished",
    "GoalSessionStarted",
    "GoalSpent",
    "GoalStarted",
    "GoalStatus",
    "GoalVerdict",
    "HandoffTrigger",
    "HandoffWritten",
    "HookOutcome",
    "HookRan",
    "LoopDetected",
    "MemoryArchived",
    "TodoItem",
    "TodoStatus",
    "TodoUpdated",
]

# -- hooks ---------------------------------------------------------------------------------------------------

HookOutcome = Literal["ok", "allow", "deny", "ask", "rewrite", "context", "block", "continue", "error"]
"""What a hook's run decided: ``ok`` (nothing to say), ``allow`` / ``deny`` / ``ask`` (a tool call or a permission),
``rewrite`` (new tool arguments), ``context`` (text added for the model), ``block`` (exit 2 or a ``block``
decision: the action does not happen), ``continue`` (a Stop hook sent the run on), ``error`` (the hook crashed,
timed out or printed malformed output: it blocks unless its ``onError`` is ``allow``)."""


class HookRan(_EventBase):
    """A configured hook command ran (one event per handler run)."""

    type: Literal["hook_ran"] = "hook_ran"
    run_id: str | None = None
    hook_event: str
    """``PreToolUse``, ``PostToolUse``, ``PermissionRequest``, ``UserPromptSubmit``, ``Stop``, ``SubagentStop``,
    ``PreCompact``, ``SessionStart`` or ``SessionEnd``."""
    matcher: str = ""
    command: str
    """The handler's command as configured (at most 500 characters)."""
    source: str = ""
    """The hooks file it came from."""
    call_id: str = ""
    tool: str = ""
    exit_code: int | None = None
    """None: the hook did not exit by itself (it timed out and was killed with its group, or could not start)."""
    duration_ms: float = 0.0
    outcome: HookOutcome
    reason: str = ""
    """The hook's reason (its stderr on exit 2, its JSON's reason), or what went wrong with it."""
    context: str = ""
    """Text given to the model because of this run (a PostToolUse or UserPromptSubmit hook's additional context, a
    Stop hook's reason to go on), exactly as the model read it: a rebuilt history places it where the loop did."""
    system_message: str = ""
    """The hook's ``systemMessage``: for the person, not the model (clipped)."""


# -- the plan ------------------------------------------------------------------------------------------------

TodoStatus = Literal["pending", "in_progress", "completed"]


class TodoItem(BaseModel):
    """One item of the model's plan."""

    text: str
    status: TodoStatus = "pending"


class TodoUpdated(_EventBase):
    """The model wrote or marked its plan (the ``todo`` tool): the whole list as it now stands."""

    type: Literal["todo_updated"] = "todo_updated"
    run_id: str | None = None
    items: list[TodoItem] = Field(default_factory=list[TodoItem])
    carried: bool = False
    """Recorded again by a compaction (in its batch), not written by the model: the items did not change. It keeps
    the plan among the events the model's context is rebuilt from; a client showing changes may skip it."""


# -- loop detection ------------------------------------------------------------------------------------------


class LoopDetected(_EventBase):
    """A run repeated the same tool call (or cycled through the same few): the model was told, or the run stopped."""

    type: Literal["loop_detected"] = "loop_detected"
    run_id: str
    step: int
    action: Literal["notice", "stop"]
    repeats: int
    """How many times the call (or the cycle) has come round in a row."""
    calls: list[str] = Field(default_factory=list[str])
    """The repeated calls, as ``tool(arguments)`` clipped for display, in cycle order."""
    period: int = 1
    """How many steps one round takes: 1 is the same step again, 2 or 3 a cycle (A, B, A, B, ...)."""
    note: str = ""
    """What the model was told (a notice), placed after the step's tool results; a rebuilt history places it
    again. Empty for a stop."""


# -- goals ---------------------------------------------------------------------------------------------------

GoalStatus = Literal["running", "completed", "failed", "cancelled"]


class GoalBudget(BaseModel):
    """What a goal may spend; None is no limit on that measure."""

    sessions: int | None = None
    steps: int | None = None
    tokens: int | None = None
    time_s: float | None = None


class GoalSpent(BaseModel):
    """What a goal has spent so far."""

    sessions: int = 0
    steps: int = 0
    tokens: int = 0
    time_s: float = 0.0


class CriterionVerdict(BaseModel):
    """The grader's judgement of one acceptance criterion."""

    criterion: str
    passed: bool
    reason: str


class GoalStarted(_EventBase):
    """A goal began, on the goal's own session (whose children do the work and grade it)."""

    type: Literal["goal_started"] = "goal_started"
    goal_id: str
    goal: str
    criteria: list[str]
    budget: GoalBudget = Field(default_factory=GoalBudget)


class GoalSessionStarted(_EventBase):
    """A work session toward the goal started (a child of the goal's session): a checkpoint between sessions."""

    type: Literal["goal_session_started"] = "goal_session_started"
    goal_id: str
    attempt: int
    """1 for the first work session, 2 for the next, and so on."""
    child_session_id: str
    brief: str
    """The first message it was given (the goal, the criteria and the last verdict's findings)."""
    handoff_from: str = ""
    """Set when it continues an earlier work session through a handoff (past the watermark)."""
    spent: GoalSpent = Field(default_factory=GoalSpent)


class GoalVerdict(_EventBase):
    """The grader judged a work session's evidence against every criterion."""

    type: Literal["goal_verdict"] = "goal_verdict"
    goal_id: str
    attempt: int
    child_session_id: str
    grader_session_id: str
    passed: bool
    """Every criterion passed."""
    criteria: list[CriterionVerdict]
    findings: str = ""
    """What the next session must know (the failed criteria and why)."""
    spent: GoalSpent = Field(default_factory=GoalSpent)


class GoalFinished(_EventBase):
    """A goal ended."""

    type: Literal["goal_finished"] = "goal_finished"
    goal_id: str
    status: GoalStatus
    reason: str
    left: list[str] = Field(default_factory=list[str])
    """The criteria not yet met (with the grader's last reason) when it failed or was cancelled."""
    spent: GoalSpent = Field(default_factory=GoalSpent)


# -- handoff and memory --------------------------------------------------------------------------------------

HandoffTrigger = Literal["manual", "goal"]


class HandoffWritten(_EventBase):
    """The session wrote its handoff and a fresh session continues from it (this session is then archived)."""

    type: Literal["handoff_written"] = "handoff_written"
    to_session_id: str
    text: str
    """The handoff in its fixed blocks (goal and constraints, decisions, state of files and systems, work done with
    evidence, open items, next step, warnings)."""
    instructions: list[str] = Field(default_factory=list[str])
    """The user's instructions, carried verbatim."""
    trigger: HandoffTrigger = "manual"
    extra: str = ""
    """What the person asked the fresh session besides (``handoff_session``'s ``instructions``), verbatim."""
    from_session_id: str = ""
    """Set on the copy that opens the fresh session (``session_id`` and ``to_session_id`` both the fresh one): the
    session whose handoff it is. The fresh session's history starts with this copy's text."""
    attempts: int = 1
    """How many times the model was asked for the handoff (a second time when the first failed its checks)."""


class MemoryArchived(_EventBase):
    """Notes the session saved in its own memory namespace were promoted to another (the project's)."""

    type: Literal["memory_archived"] = "memory_archived"
    from_namespace: str
    to_namespace: str
    keys: list[str] = Field(default_factory=list[str])
    """The notes promoted (by key or title)."""
    renamed: dict[str, str] = Field(default_factory=dict[str, str])
    """Notes promoted under another key, because the project already had a different note under theirs: session key
    -> the key it has in the project (nothing is overwritten)."""
    unchanged: list[str] = Field(default_factory=list[str])
    """Notes the project already had, word for word (promoted before): nothing to do."""
    skipped: list[str] = Field(default_factory=list[str])
    """Notes that could not be promoted, each ``key: why`` (a key that is not UTF-8 or not a slug, say)."""
