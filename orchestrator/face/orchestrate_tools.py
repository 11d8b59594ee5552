"""The face's orchestration tools: start one in a session, read its task graph's snapshot, cancel it.

An orchestration runs in the host (:mod:`orchestrator.runtime.orchestrations`): ``orchestrate`` answers at once
(or after a bounded ``wait_s``) with the graph's snapshot, and the planner, executors and reviewer are child
sessions of the orchestrating session, shown on its stream. Every transition is an event of that session
(``orchestration_started``, ``task_graph_planned``, ``task_state_changed``, ``orchestration_finished``), so a client
follows the graph with ``read_events`` and reads where it is with ``get_orchestration``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from orchestrator.agents.limits import Limits, OrchestrationError
from orchestrator.agents.report import Report
from orchestrator.protocol import MAX_RUN_S, MAX_WAIT_S
from orchestrator.runtime.host import HostError, SessionHost

__all__ = ["MAX_PARALLEL", "add_orchestrate_tools"]

MAX_PARALLEL = 32
"""Tasks of one orchestration with a child going at once, at most (the subagents server's bound on children)."""

_READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)


@contextlib.contextmanager
def _refusals() -> Iterator[None]:
    """The host's and the controller's refusals as error results, in the caller's terms."""
    try:
        yield
    except (HostError, OrchestrationError) as exc:
        raise ToolError(str(exc)) from exc


def add_orchestrate_tools(face: MCPServer, host: SessionHost) -> None:
    """Register ``orchestrate``, ``get_orchestration`` and ``cancel_orchestration`` on ``face`` over ``host``."""

    @face.tool()
    async def orchestrate(
        session_id: str,
        goal: str = Field(max_length=16_000),
        max_parallel: int = Field(4, ge=1, le=MAX_PARALLEL),
        task_timeout_s: float = Field(900.0, gt=0, le=MAX_RUN_S),
        max_attempts: int = Field(3, ge=1, le=10),
        wait_s: float = Field(0.0, ge=0, le=MAX_WAIT_S),
    ) -> Report:
        """Carry out ``goal`` in session ``session_id`` as a task graph; returns at once with the graph's snapshot.

        A planner child writes the graph (tasks with dependencies and acceptance criteria); executor children run
        the ready tasks, at most ``max_parallel`` at once, each run bounded by ``task_timeout_s``; a reviewer child
        checks each result, and "changes needed" re-queues the task with the findings, up to ``max_attempts``. A
        failed task blocks only its dependants. The children are child sessions of this one (bounded by it, shown
        on its stream). Follow it with get_orchestration (``wait_s`` waits for its end) or read_events
        (task_state_changed events); cancel_orchestration ends it. ``wait_s`` here waits up to that long for its end.
        """
        with _refusals():
            limits = Limits(max_parallel=max_parallel, task_timeout_s=task_timeout_s, max_attempts=max_attempts)
            started = await host.orchestrations.start(session_id, goal, limits)
            if wait_s <= 0:
                return started
            return await host.orchestrations.snapshot(session_id, started.orchestration_id, wait_s)

    @face.tool(annotations=_READ_ONLY)
    async def get_orchestration(
        session_id: str,
        orchestration_id: str | None = None,
        wait_s: float = Field(0.0, ge=0, le=MAX_WAIT_S),
    ) -> Report:
        """An orchestration's task graph: its status (planning, running, passed, failed, cancelled) and each task.

        ``orchestration_id``: default the session's newest. ``wait_s`` waits up to that long for it to end.
        """
        with _refusals():
            return await host.orchestrations.snapshot(session_id, orchestration_id, wait_s)

    @face.tool()
    async def cancel_orchestration(
        session_id: str, orchestration_id: str | None = None, reason: str = Field("", max_length=1000)
    ) -> Report:
        """End an orchestration: its children's runs are cancelled and its unfinished tasks recorded cancelled.

        ``orchestration_id``: default the session's newest. Returns the snapshot once it has ended (bounded).
        """
        with _refusals():
            return await host.orchestrations.cancel(session_id, orchestration_id, reason or "cancelled by a client")
