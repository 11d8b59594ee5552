"""The face's goal tools: start a goal that spans sessions, read where it is, list the goals, cancel one.

A goal runs in the host (:mod:`orchestrator.runtime.goals`): ``start_goal`` answers at once with the goal's
report, and its work sessions and graders are children of the goal's own session, shown on its stream. Every step
is an event of that session (``goal_started``, ``goal_session_started``, ``goal_verdict``, ``goal_finished``), so a
client follows a goal with ``read_events`` on ``GoalReport.session_id`` and reads where it is with ``get_goal``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from orchestrator.events_long import GoalBudget
from orchestrator.face.input import check_directory
from orchestrator.goals.budget import BudgetError
from orchestrator.goals.controller import GoalError
from orchestrator.protocol import MAX_WAIT_S
from orchestrator.protocol_long import GoalList, GoalReport
from orchestrator.runtime.host import HostError, SessionHost

__all__ = ["add_goal_tools"]

_READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)


@contextlib.contextmanager
def _refusals() -> Iterator[None]:
    """The host's and the controller's refusals as error results, in the caller's terms."""
    try:
        yield
    except (HostError, GoalError, BudgetError) as exc:
        raise ToolError(str(exc)) from exc


def add_goal_tools(face: MCPServer, host: SessionHost) -> None:
    """Register ``start_goal``, ``get_goal``, ``list_goals``, ``cancel_goal`` and ``resume_goal`` on ``face``."""

    @face.tool()
    async def start_goal(
        goal: Annotated[str, Field(max_length=16_000)],
        criteria: Annotated[list[str], Field(max_length=30)],
        budget: GoalBudget | None = None,
        cwd: str = "",
        mode: str = "",
        model: str = "",
    ) -> GoalReport:
        """Work toward ``goal`` over as many sessions as it takes; returns at once with the goal's report.

        Each work session (a child of the goal's own new session, headless, in ``cwd``) is given the goal, every
        criterion and the last grader's findings; when it ends a grader child judges its evidence (files written,
        command outputs, its final answer) against each criterion. The goal ends completed when every criterion
        passes, failed when its ``budget`` (sessions, steps, tokens, time_s; sessions default 5) is spent, or
        cancelled. ``mode``: the goal session's policy mode, bounding every child (default accept-edits).
        ``model``: the work sessions' model (default as configured). Follow it with get_goal (``wait_s``) or
        read_events on the report's session_id.
        """
        with _refusals():
            check_directory(cwd)
            return await host.goals.start(goal, criteria, budget or GoalBudget(), cwd=cwd, mode=mode, model=model)

    @face.tool(annotations=_READ_ONLY)
    async def get_goal(goal_id: str, wait_s: float = Field(0.0, ge=0, le=MAX_WAIT_S)) -> GoalReport:
        """A goal's report: status, each attempt with its verdict per criterion, spent against the budget.

        ``wait_s`` waits up to that long for it to end.
        """
        with _refusals():
            return await host.goals.snapshot(goal_id, wait_s)

    @face.tool(annotations=_READ_ONLY)
    async def list_goals() -> GoalList:
        """Every goal, newest first."""
        return GoalList(goals=await host.goals.every())

    @face.tool()
    async def resume_goal(goal_id: str) -> GoalReport:
        """Carry on a goal that nothing drives (Loom stopped while it ran): from where its events left it.

        A finished work session is not run again; an interrupted one's run is resumed, an interrupted grading is
        done again. Answers at once; follow it with get_goal. A daemon with autoResume does this by itself.
        """
        with _refusals():
            return await host.goals.resume(goal_id)

    @face.tool()
    async def cancel_goal(goal_id: str) -> GoalReport:
        """End a goal: its running work session or grader is cancelled, and it is recorded cancelled."""
        with _refusals():
            return await host.goals.cancel(goal_id, "cancelled by a client")
