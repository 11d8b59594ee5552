"""The orchestrations a host runs: each one's controller driven in a task the host owns, resumed after a restart.

:class:`Orchestrations` sits between the face's orchestration tools (:mod:`orchestrator.face.orchestrate_tools`)
and the controller (:mod:`orchestrator.agents.orchestrate`). It keeps one
:class:`~orchestrator.agents.orchestrate.Orchestrator` per orchestrating session (``cancel`` needs the instance
that drives) and drives each orchestration in its own task group, entered by the host, so a tool call that starts
one answers at once. The children are started through Loom's own face, in-process, with one client held for the
life of the host (as a session's ``subagents`` tools do): a child is a session like any other.

Nothing here holds state the store does not have: the graph is the fold of the orchestrating session's events. So
when the host closes (or the process dies) the orchestrations simply stop where their events left them, and
:meth:`Orchestrations.resume_unfinished` carries them on after a restart without running a finished task again.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio

from orchestrator.runtime.face_driven import FaceDriven
from orchestrator.runtime.host_runs import HostError

if TYPE_CHECKING:
    from orchestrator.agents.graph import GraphState
    from orchestrator.agents.orchestrate import Limits, Orchestrator
    from orchestrator.agents.report import Report
    from orchestrator.events import Event
    from orchestrator.runtime.host import SessionHost

__all__ = ["RECENT_SESSIONS", "Orchestrations"]

logger = logging.getLogger(__name__)

RECENT_SESSIONS = 500
"""How many of the newest sessions a restart looks through for orchestrations' children (whose parents it reads)."""


@dataclass
class _Going:
    """One orchestration this host drives: its live state (the controller folds each event it records into it)."""

    session_id: str
    state: GraphState
    done: anyio.Event = field(default_factory=anyio.Event)
    error: str = ""
    """Why driving it stopped with an error (the store failed, say): it stays resumable."""


class Orchestrations(FaceDriven):
    """The host's orchestrations: started, followed, cancelled, and resumed when the host starts.

    Args:
        host: The session host whose sessions orchestrate and whose face starts the children.
    """

    def __init__(self, host: SessionHost) -> None:
        super().__init__(host, "orchestrations")
        self._controllers: dict[str, Orchestrator] = {}
        self._going: dict[str, _Going] = {}

    # -- starting and following ------------------------------------------------------------------------

    async def start(self, session_id: str, goal: str, limits: Limits) -> Report:
        """Begin an orchestration of ``goal`` in ``session_id`` and drive it in the background; its first snapshot.

        Raises:
            HostError: no such session (or it cannot be used).
            orchestrator.agents.limits.OrchestrationError: the goal is empty.
        """
        from orchestrator.agents.report import report
        from orchestrator.runtime.runtime import new_id

        await self.host.session(session_id)  # an unknown or archived session is refused before anything is recorded
        controller = await self._controller(session_id)
        state = await controller.begin(goal, limits, orchestration_id=new_id("orch"))
        self._drive(session_id, controller, state, limits)
        return report(state)

    async def snapshot(self, session_id: str, orchestration_id: str | None = None, wait_s: float = 0.0) -> Report:
        """An orchestration's snapshot (the session's newest by default), after waiting up to ``wait_s`` for its end.

        Raises:
            HostError: no such session, or no such orchestration in it.
        """
        from orchestrator.agents.report import report, snapshot

        await self.host.record(session_id)
        going = self._going.get(orchestration_id) if orchestration_id is not None else self._newest(session_id)
        if going is not None and going.session_id == session_id:
            if wait_s > 0:
                with anyio.move_on_after(wait_s):
                    await going.done.wait()
            return report(going.state)  # the controller folds each event it records into it: it is the store's
        found = snapshot(await self._events(session_id), orchestration_id)
        if found is None:
            raise HostError(self._unknown(session_id, orchestration_id))
        return found

    async def cancel(self, session_id: str, orchestration_id: str | None, reason: str, wait_s: float = 10.0) -> Report:
        """End an orchestration this host drives: its children cancelled, its unfinished tasks ``cancelled``.

        Raises:
            HostError: no such orchestration, or it is not going in this process (it ended, or nothing resumed it).
        """
        going = self._going.get(orchestration_id) if orchestration_id is not None else self._newest(session_id)
        if going is None or going.session_id != session_id or going.done.is_set():
            current = await self.snapshot(session_id, orchestration_id)  # unknown: refused there, in its terms
            if current.status in ("passed", "failed", "cancelled"):
                raise HostError(f"orchestration {current.orchestration_id!r} already ended {current.status}")
            raise HostError(
                f"orchestration {current.orchestration_id!r} is not going in this process (Loom restarted without "
                "autoResume); nothing of it is running to cancel"
            )
        oid = going.state.orchestration_id
        self._controllers[session_id].cancel(oid, reason or "cancelled")
        with anyio.move_on_after(wait_s):
            await going.done.wait()
        return await self.snapshot(session_id, oid)

    def going(self, orchestration_id: str) -> bool:
        """Whether this host is driving that orchestration now."""
        going = self._going.get(orchestration_id)
        return going is not None and not going.done.is_set()

    # -- resuming --------------------------------------------------------------------------------------

    async def resume_unfinished(self) -> list[str]:
        """Carry on the orchestrations a stop or crash left unfinished; returns the ids of those resumed.

        An orchestrating session is found through its children: the parents of the runs this host marked
        interrupted, and of the newest :data:`RECENT_SESSIONS` sessions that run as one of the orchestration's
        roles. Only those sessions' events are read. An orchestration that cannot be resumed is logged and left.
        """
        from orchestrator.agents.graph import fold
        from orchestrator.agents.orchestrate import Limits
        from orchestrator.agents.report import unfinished
        from orchestrator.agents.roles import ROLES

        store = self.host.runtime.log.store
        parents: dict[str, None] = {}
        for run_id in self.host.interrupted:
            run = await store.get_run(run_id)
            record = await store.get_session(run.session_id) if run is not None else None
            if record is not None and record.parent_session_id:
                parents[record.parent_session_id] = None
        for record in await store.list_sessions(limit=RECENT_SESSIONS):
            if record.parent_session_id and record.agent in ROLES:
                parents[record.parent_session_id] = None
        resumed: list[str] = []
        for session_id in parents:
            events = await self._events(session_id)
            for oid in unfinished(events):
                if self.going(oid):
                    continue
                try:
                    await self.host.session(session_id)
                    controller = await self._controller(session_id)
                except HostError as exc:
                    logger.warning("not resuming orchestration %s: %s", oid, exc)
                    continue
                state = await self._without_lost_runs(fold(events, oid))
                s = state.started
                limits = Limits(
                    max_parallel=s.max_parallel, task_timeout_s=s.task_timeout_s, max_attempts=s.max_attempts
                )
                self._drive(session_id, controller, state, limits)
                resumed.append(oid)
        return resumed

    async def _without_lost_runs(self, state: GraphState) -> GraphState:
        """``state`` forgetting the recorded child runs that the store does not have, so they are started again.

        ``send_message`` answers (and the controller records the run) before the run's first event is stored; a
        stop in between leaves a run id no store knows, whose run never began. Its child's session is kept: the
        controller looks for a run in it, finds none, and starts the one that never began (nothing ran twice).
        """
        store = self.host.runtime.log.store
        for task in state.tasks.values():
            if task.state in ("running", "reviewing") and task.child_run_id:
                if await store.get_run(task.child_run_id) is None:
                    logger.info("task %s: its child's run %s never began; starting it", task.spec.id, task.child_run_id)
                    task.child_run_id = ""
        planner = state.planner
        if planner is not None and planner.child_run_id and await store.get_run(planner.child_run_id) is None:
            state.planner = planner.model_copy(update={"child_run_id": ""})
        return state

    # -- inside ----------------------------------------------------------------------------------------

    def _drive(self, session_id: str, controller: Orchestrator, state: GraphState, limits: Limits) -> None:
        going = self._going[state.orchestration_id] = _Going(session_id, state)
        self.task_group.start_soon(self._run, controller, going, limits)

    async def _run(self, controller: Orchestrator, going: _Going, limits: Limits) -> None:
        try:
            await controller.drive(going.state, limits)
        except Exception as exc:  # a store or face failure stops this orchestration (resumable), never the host
            going.error = f"{type(exc).__name__}: {exc}"
            logger.warning("orchestration %s stopped: %s", going.state.orchestration_id, going.error, exc_info=True)
        finally:
            going.done.set()

    def _newest(self, session_id: str) -> _Going | None:
        mine = [g for g in self._going.values() if g.session_id == session_id]
        return mine[-1] if mine else None

    async def _events(self, session_id: str) -> Sequence[Event]:
        return await self.host.runtime.log.store.read_events(session_id)

    @staticmethod
    def _unknown(session_id: str, orchestration_id: str | None) -> str:
        if orchestration_id is None:
            return f"session {session_id!r} has no orchestration; start one with orchestrate"
        return f"no orchestration {orchestration_id!r} in session {session_id!r}"

    async def _controller(self, session_id: str) -> Orchestrator:
        """The session's controller, its children started through the in-process face."""
        controller = self._controllers.get(session_id)
        if controller is not None:
            return controller
        from clients.loom import FaceError
        from orchestrator.agents.children import FaceChildren
        from orchestrator.agents.orchestrate import Orchestrator

        client = await self._face_client()
        log = self.host.runtime.log

        async def append(events: Sequence[Event]) -> None:
            await log.append(*events)

        children = FaceChildren(client, session_id, append, refusals=(FaceError,))
        return self._controllers.setdefault(session_id, Orchestrator(children, session_id))
