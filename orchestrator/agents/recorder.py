"""Recording an orchestration's transitions, and starting and awaiting its children, for the controller.

Every change goes through :meth:`Recorder._record`: the event is stored, then folded into the
:class:`~orchestrator.agents.graph.GraphState`, so what the controller acts on is what a restart rebuilds. A
child is started with :meth:`Recorder._launch`, recorded after each of its two steps.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import anyio

from orchestrator.agents.children import ChildHandle, ChildOutcome, Children, ChildSpec
from orchestrator.agents.graph import GraphState
from orchestrator.agents.limits import Limits
from orchestrator.events import (
    CHILD_TEXT_CHARS,
    Event,
    OrchestrationFinished,
    OrchestrationStatus,
    TaskState,
    TaskStateChanged,
)

__all__ = ["Recorder", "cut", "run_failure"]


def cut(text: str) -> str:
    """``text`` cut to what an event carries (:data:`~orchestrator.events.CHILD_TEXT_CHARS`)."""
    return text if len(text) <= CHILD_TEXT_CHARS else text[: CHILD_TEXT_CHARS - 1] + "…"


def run_failure(role: str, outcome: ChildOutcome | None, timeout_s: float) -> str:
    """Why a child's run did not give an answer: it timed out, failed or was cancelled."""
    if outcome is None:
        return f"the {role}'s run timed out after {timeout_s:g} s"
    return f"the {role}'s run {outcome.status}" + (f": {outcome.reason}" if outcome.reason else "")


class Recorder:
    """The controller's base: where its events go and how its children are started.

    Args:
        children: How children are started and awaited, and where events go.
        session_id: The orchestrating session (the events' ``session_id``, the children's parent).
    """

    def __init__(self, children: Children, session_id: str) -> None:
        self.children = children
        self.session_id = session_id
        self._lock = anyio.Lock()

    def _ids(self, state: GraphState) -> dict[str, str]:
        return {"session_id": self.session_id, "orchestration_id": state.orchestration_id}

    async def _record(self, state: GraphState, event: Event) -> None:
        """Store the event, then fold it: the state acted on is what a restart would rebuild."""
        async with self._lock:
            await self.children.append([event])
            state.apply(event)

    async def _task_event(
        self,
        state: GraphState,
        tid: str,
        new: TaskState,
        *,
        attempt: int,
        reason: str = "",
        findings: Sequence[str] = (),
        child: ChildHandle | None = None,
        result: str = "",
    ) -> None:
        event = TaskStateChanged(
            **self._ids(state),
            task_id=tid,
            state=new,
            attempt=attempt,
            reason=reason,
            findings=list(findings),
            child_session_id=child.session_id if child else "",
            child_run_id=child.run_id if child else "",
            result=result,
        )
        await self._record(state, event)

    async def _launch(
        self, spec: ChildSpec, known: ChildHandle | None, record: Callable[[ChildHandle], Awaitable[None]]
    ) -> ChildHandle:
        """Create and start a child, recording it after each step; ``known``: what a restart found recorded.

        Shielded: a child created is a child recorded, or a restart would lose it. Only a process dying between a
        step and its record escapes, and then the session is created again (the first never ran) or the run is
        found again (:meth:`~orchestrator.agents.children.Children.find_run`), never started twice.
        """
        with anyio.CancelScope(shield=True):
            session_id = known.session_id if known is not None else ""
            run_id = known.run_id if known is not None else ""
            if not session_id:
                session_id = await self.children.create(spec)
                await record(ChildHandle(session_id, ""))
            if not run_id:
                found = await self.children.find_run(session_id) if known is not None else None
                run_id = found or await self.children.start(session_id, spec)
                await record(ChildHandle(session_id, run_id))
        return ChildHandle(session_id, run_id)

    async def _wait(self, child: ChildHandle, limits: Limits) -> ChildOutcome | None:
        """The child's outcome; one still going past its deadline (and the grace) is cancelled: None."""
        outcome = await self.children.wait(child, limits.task_timeout_s + limits.wait_grace_s)
        if outcome is None:
            with anyio.CancelScope(shield=True):
                await self.children.cancel(child)
        return outcome

    async def _finish(self, state: GraphState, status: OrchestrationStatus, reason: str) -> None:
        event = OrchestrationFinished(**self._ids(state), status=status, reason=reason, counts=state.counts())
        await self._record(state, event)
