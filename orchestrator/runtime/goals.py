"""The goals a host runs: each one's controller driven in a task the host owns, resumed after a restart.

:class:`Goals` sits between the face's goal tools (:mod:`orchestrator.face.goal_tools`) and the controller
(:mod:`orchestrator.goals.controller`), as :class:`~orchestrator.runtime.orchestrations.Orchestrations` does for
orchestrations. ``start`` creates the goal's own session (headless: a goal runs unattended), records the goal in
it and drives it in the background, so the tool answers at once. Work sessions and graders are children of that
session, started through Loom's own face in-process with one client held for the life of the host.

Nothing here holds state the store does not have: a goal is the fold of its session's events. A goal's session is
found by its head (its first events hold its ``goal_started``): among the newest :data:`RECENT_SESSIONS` sessions,
the host reads the heads of those that have children or a goal's title, once, then keeps the index as goals start.
When the host closes (or the process dies) goals stop where their events left them; :meth:`Goals.resume_unfinished`
carries them on.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from orchestrator.runtime.face_driven import FaceDriven
from orchestrator.runtime.host_runs import HostError

if TYPE_CHECKING:
    from orchestrator.events_long import GoalBudget
    from orchestrator.goals.controller import GoalController, GoalSettings
    from orchestrator.goals.state import GoalState
    from orchestrator.protocol_long import GoalReport
    from orchestrator.runtime.host import SessionHost

__all__ = ["GOAL_TITLE", "HEAD_EVENTS", "RECENT_SESSIONS", "Goals"]

logger = logging.getLogger(__name__)

RECENT_SESSIONS = 500
"""How many of the newest sessions are looked through for goals (once per host)."""
HEAD_EVENTS = 6
"""A goal session's ``goal_started`` is among its first events (after ``session_created`` and a notice or two)."""
GOAL_TITLE = "goal: "
_LIVE = frozenset({"running", "queued", "awaiting_approval", "needs_review"})
"""How a goal's session is titled (then the goal, cut)."""


@dataclass
class _Going:
    """One goal this host drives: its live state (the controller folds each event it records into it)."""

    state: GoalState
    done: anyio.Event = field(default_factory=anyio.Event)
    error: str = ""


class Goals(FaceDriven):
    """The host's goals: started, followed, listed, cancelled, and resumed when the host starts.

    Args:
        host: The session host whose sessions hold the goals and whose face starts the children.
        settings: How goals run (default: read from ``$LOOM_HOME/config.json``'s ``goals`` when first needed).
    """

    def __init__(self, host: SessionHost, settings: GoalSettings | None = None) -> None:
        super().__init__(host, "goals")
        self.settings = settings
        self._controllers: dict[str, GoalController] = {}
        self._going: dict[str, _Going] = {}
        self._index: dict[str, str] | None = None
        """goal id -> its session, once the heads were read."""
        self._indexing = anyio.Lock()

    # -- the face's calls ------------------------------------------------------------------------------

    async def start(
        self, goal: str, criteria: list[str], budget: GoalBudget, *, cwd: str, mode: str = "", model: str = ""
    ) -> GoalReport:
        """Create the goal's session, record the goal and drive it in the background; its first snapshot.

        Raises:
            HostError: ``cwd``, ``mode`` or ``model`` cannot be used.
            orchestrator.goals.controller.GoalError: the goal or its criteria cannot be used.
            orchestrator.goals.budget.BudgetError: the budget cannot be used.
        """
        from orchestrator.face.models import top_level_model
        from orchestrator.goals.budget import check_budget
        from orchestrator.goals.controller import check_goal
        from orchestrator.goals.state import report
        from orchestrator.models import ModelSpecError

        check_goal(goal, criteria)  # refused before a session is made for it
        check_budget(budget)
        try:
            chosen, notice = top_level_model(model or None, self.host.runtime.model, Path(cwd))
        except ModelSpecError as exc:
            raise HostError(str(exc)) from exc
        session = await self.host.create_session(
            Path(cwd), chosen, mode or "accept-edits", headless=True, notice=notice
        )
        controller = await self._controller(session.id)
        state = await controller.begin(goal, criteria, budget)
        await self.host.runtime.log.store.set_session_title(session.id, f"{GOAL_TITLE}{' '.join(goal.split())[:70]}")
        (await self._goal_index())[state.goal_id] = session.id
        self._drive(controller, state)
        return report(state)

    async def snapshot(self, goal_id: str, wait_s: float = 0.0) -> GoalReport:
        """A goal's report, after waiting up to ``wait_s`` for its end.

        Raises:
            HostError: no such goal.
        """
        from orchestrator.goals.state import report

        going = self._going.get(goal_id)
        if going is not None:
            if wait_s > 0:
                with anyio.move_on_after(wait_s):
                    await going.done.wait()
            return report(going.state)
        return report(await self._stored(goal_id))

    async def every(self) -> list[GoalReport]:
        """Every goal, newest first."""
        from orchestrator.goals.state import report

        out: list[GoalReport] = []
        for goal_id in reversed(list((await self._goal_index()).keys())):
            going = self._going.get(goal_id)
            try:
                out.append(report(going.state) if going is not None else report(await self._stored(goal_id)))
            except HostError:
                continue
        return out

    async def cancel(self, goal_id: str, reason: str, wait_s: float = 10.0) -> GoalReport:
        """End a goal: its running child cancelled, the goal recorded ``cancelled``.

        A goal that nothing drives (Loom restarted and did not resume it) is recorded cancelled directly.

        Raises:
            HostError: no such goal, or it already ended.
        """
        from orchestrator.goals.state import report

        going = self._going.get(goal_id)
        if going is not None and not going.done.is_set():
            self._controllers[going.state.session_id].cancel(goal_id, reason)
            with anyio.move_on_after(wait_s):
                await going.done.wait()
            return report(going.state)
        state = going.state if going is not None else await self._stored(goal_id)
        if state.finished is not None:
            raise HostError(f"goal {goal_id!r} already ended {state.finished.status}")
        elsewhere = await self._driven_elsewhere(state)
        if elsewhere:
            raise HostError(
                f"goal {goal_id!r} is being worked on by another Loom process ({elsewhere}); cancel it there "
                "(Ctrl-C in its loom goal)"
            )
        controller = await self._controller(state.session_id)
        await controller.end(state, "cancelled", reason)
        return report(state)

    async def resume(self, goal_id: str) -> GoalReport:
        """Carry on a goal that nothing drives (its process died, and no daemon with autoResume took it up).

        Raises:
            HostError: no such goal, it ended, it is going here already, or another live process works on it.
        """
        from orchestrator.goals.state import report

        if self.going(goal_id):
            raise HostError(f"goal {goal_id!r} is already going; get_goal follows it")
        state = await self._stored(goal_id)
        if state.finished is not None:
            raise HostError(f"goal {goal_id!r} already ended {state.finished.status}; start a new one")
        elsewhere = await self._driven_elsewhere(state)
        if elsewhere:
            raise HostError(f"goal {goal_id!r} is being worked on by another Loom process ({elsewhere})")
        await self.host.session(state.session_id)
        self._drive(await self._controller(state.session_id), state)
        return report(state)

    def going(self, goal_id: str) -> bool:
        """Whether this host drives that goal now."""
        going = self._going.get(goal_id)
        return going is not None and not going.done.is_set()

    # -- resuming --------------------------------------------------------------------------------------

    async def resume_unfinished(self) -> list[str]:
        """Carry on the goals a stop or crash left unfinished; returns the ids of those resumed.

        Run after the host resumed the interrupted runs, so that a goal waits for its work session's resumed run.
        """
        resumed: list[str] = []
        for goal_id in list((await self._goal_index()).keys()):
            if self.going(goal_id):
                continue
            try:
                state = await self._stored(goal_id)
                if state.finished is not None:
                    continue
                await self.host.session(state.session_id)
                controller = await self._controller(state.session_id)
            except HostError as exc:
                logger.warning("not resuming goal %s: %s", goal_id, exc)
                continue
            self._drive(controller, state)
            resumed.append(goal_id)
        return resumed

    # -- inside ----------------------------------------------------------------------------------------

    async def _driven_elsewhere(self, state: GoalState) -> str:
        """The live process other than this one running a child of the goal (``pid N``), or ``""``."""
        from orchestrator.runtime.owner import owner_alive, this_process

        me = this_process()
        for record in await self.host.runtime.log.store.list_sessions(include_archived=True, limit=RECENT_SESSIONS):
            if record.parent_session_id != state.session_id or record.last_run_status not in _LIVE:
                continue
            owner = record.last_run_owner
            if owner and owner != me and owner_alive(owner):
                return f"pid {owner.partition(':')[0]}"
        return ""

    def _drive(self, controller: GoalController, state: GoalState) -> None:
        going = self._going[state.goal_id] = _Going(state)
        self.task_group.start_soon(self._run, controller, going)

    async def _run(self, controller: GoalController, going: _Going) -> None:
        try:
            await controller.drive(going.state)
        except Exception as exc:  # a store or face failure stops this goal (resumable), never the host
            going.error = f"{type(exc).__name__}: {exc}"
            logger.warning("goal %s stopped: %s", going.state.goal_id, going.error, exc_info=True)
        finally:
            going.done.set()

    async def _stored(self, goal_id: str) -> GoalState:
        from orchestrator.goals.state import fold

        session_id = (await self._goal_index()).get(goal_id)
        if session_id is None:
            raise HostError(f"no goal {goal_id!r}; list_goals shows the goals there are")
        return fold(await self.host.runtime.log.store.read_events(session_id), goal_id)

    async def _goal_index(self) -> dict[str, str]:
        """Goal id -> session, oldest first: read from the heads of the newest sessions once, then kept."""
        from orchestrator.events_long import GoalStarted

        async with self._indexing:
            if self._index is None:
                store = self.host.runtime.log.store
                found: dict[str, str] = {}
                records = await store.list_sessions(include_archived=True, limit=RECENT_SESSIONS)
                # Only a goal's session is read: a top-level session with children (its work sessions), or titled
                # as one (the title is set as the goal starts, before its first child is created).
                parents = {r.parent_session_id for r in records if r.parent_session_id}
                for record in reversed(records):
                    if record.parent_session_id or record.last_seq < 2:
                        continue
                    if record.id not in parents and not record.title.startswith(GOAL_TITLE):
                        continue
                    for event in await store.read_events(record.id, limit=HEAD_EVENTS):
                        if isinstance(event, GoalStarted):
                            found[event.goal_id] = record.id
                self._index = found
            return self._index

    def _settings(self) -> GoalSettings:
        if self.settings is None:
            from orchestrator.goals.settings import read_settings

            self.settings = read_settings(self.host.runtime.home)
        return self.settings

    async def _controller(self, session_id: str) -> GoalController:
        controller = self._controllers.get(session_id)
        if controller is not None:
            return controller
        from clients.loom import FaceError
        from orchestrator.events import Event
        from orchestrator.goals.controller import GoalController
        from orchestrator.goals.face import GoalChildren

        client = await self._face_client()
        log = self.host.runtime.log

        async def append(events: list[Event] | tuple[Event, ...] | Any) -> None:
            await log.append(*events)

        children = GoalChildren(client, session_id, append, refusals=(FaceError,))
        return self._controllers.setdefault(session_id, GoalController(children, session_id, self._settings()))
