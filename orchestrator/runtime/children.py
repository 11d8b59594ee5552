"""Child sessions in the host: starting one narrowed from its parent, showing its runs on the parent's stream.

A child is a session of its own (in the store, listed, attachable, resumable) whose ``session_created`` names
its parent, the parent's run and the agent definition it runs as. What it may do is its parent's bounds
narrowed by its request (:mod:`orchestrator.policy.narrowing`): the definition's tools, mode and deny rules, the
caller's allow-list. A request for more is refused with the reason, never started as something else.

While a child's run goes, the parent's stream carries it (:class:`ChildRelay`): ``child_started``, a
``child_activity`` per tool it calls, its approvals (tagged with the child, so that whoever watches the parent
answers them) and ``child_finished``. What a child's stream carries about its own children is passed up the same
way, so the top-level session sees the whole tree. When a parent's run ends, however it ends, the runs of its
children still going are cancelled; a run started with a timeout ends ``failed`` when it passes it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, cast

import anyio
import anyio.to_thread

from orchestrator.events import (
    CHILD_TEXT_CHARS,
    ApprovalDecided,
    ApprovalRequested,
    ChildActivity,
    ChildFinished,
    ChildStarted,
    Event,
    QuestionAnswered,
    QuestionAsked,
    SessionCreated,
    ToolCallStarted,
)
from orchestrator.models.base import Model
from orchestrator.policy.engine import MODES, Mode
from orchestrator.policy.narrowing import (
    ChildRequest,
    NarrowingError,
    request_from_json,
    request_to_json,
    stricter,
)
from orchestrator.runtime.host_runs import HostError, RunHandle
from orchestrator.runtime.runtime import ChildOpening, Session
from orchestrator.store.eventlog import EventLog
from orchestrator.store.interface import SessionRecord

if TYPE_CHECKING:
    from orchestrator.agents.definitions import AgentDefinition

__all__ = ["PARENT_ENDED", "ChildRelay", "ModelChooser", "child_opening", "reopening", "timed_out"]

logger = logging.getLogger(__name__)

PARENT_ENDED = "its parent's run ended"
"""The reason a child's run is cancelled with when the parent's run that started it ends."""
_PAGE = 500
_WAKE_S = 5.0
"""The relay re-reads at least this often, so a wake-up it missed costs seconds, never the child's events."""

ModelChooser = Callable[[str | None, str, "AgentDefinition | None", Path], Model]
"""Builds a child's model from the spec asked for (None: the agent's, else the parent's), the parent's spec,
the agent definition and the child's directory; raises HostError for a model that cannot be used."""


def timed_out(timeout_s: float) -> str:
    """The reason a run that passed its timeout ends with."""
    return f"timed out after {timeout_s:g} s (the run's timeout_s)"


async def _definition(home: Path, cwd: Path, agent: str) -> AgentDefinition:
    from orchestrator.agents.cache import current_catalog
    from orchestrator.context.instructions import project_root

    # Loom's built-in roles (planner, executor, reviewer) too; a user's or project's definition of one replaces it.
    catalog = await anyio.to_thread.run_sync(lambda: current_catalog(home, project_root(cwd)))
    found = catalog.get(agent)
    if found is None:
        known = ", ".join(sorted(catalog.agents)) or "none (put definitions in $LOOM_HOME/agents or .loom/agents)"
        raise HostError(f"no agent definition named {agent!r}; the known ones are: {known}")
    return found


async def child_opening(
    parent: Session,
    *,
    home: Path,
    parent_run_id: str,
    agent: str | None,
    allow: list[str] | None,
    mode: str | None,
    cwd: str,
) -> tuple[ChildOpening, AgentDefinition | None]:
    """The bounds, place and recorded request of a new child of ``parent``.

    Raises:
        HostError: an unknown agent, or a request for more than the parent has (the message says what).
    """
    definition = await _definition(home, parent.cwd, agent) if agent else None
    label = f"agent {definition.name!r}" if definition is not None else "the child"
    allowed = tuple(allow) if allow is not None else None
    request = (
        definition.request(allow=allowed, label=label) if definition is not None else ChildRequest(label, allow=allowed)
    )
    if mode is not None:
        request = replace(request, mode=cast(Mode, mode))
    if cwd:
        request = replace(request, cwd=cwd)
    try:
        bounds = parent.approvals.bounds.narrow(request, available=[t.name for t in parent.hub.tools])
    except NarrowingError as exc:
        raise HostError(str(exc)) from exc
    lineage = parent.lineage.child(
        parent.id,
        parent_run_id=parent_run_id,
        agent=definition.name if definition is not None else "",
        role=definition.prompt if definition is not None else "",
    )
    return ChildOpening(bounds, lineage, request_to_json(request), advisor=parent.advisor_mode or ""), definition


async def reopening(parent: Session, record: SessionRecord, log: EventLog, home: Path) -> ChildOpening:
    """The bounds and place of a child reopened from the store: its recorded request, narrowed again.

    The parent's bounds are as they are now, so a parent made stricter since makes the child stricter; a mode the
    child chose since (``set_mode``) is kept as far as the parent allows.

    Raises:
        HostError: the child's recorded request cannot be read.
    """
    first = await log.store.read_events(record.id, limit=1)
    created = first[0] if first and isinstance(first[0], SessionCreated) else None
    try:
        request = request_from_json(created.request or {}) if created is not None else ChildRequest("the child")
        parent_mode = parent.approvals.bounds.effective_mode
        own: Mode = record.mode if record.mode in MODES else "ask"
        request = replace(request, mode=stricter(own, parent_mode), cwd=record.cwd)
        bounds = parent.approvals.bounds.narrow(request)
    except NarrowingError as exc:
        raise HostError(f"cannot reopen child session {record.id}: {exc}") from exc
    role = ""
    if record.agent:
        try:
            role = (await _definition(home, parent.cwd, record.agent)).prompt
        except HostError:
            logger.warning("child session %s: agent %r is no longer defined; it runs without its role", record.id,
                           record.agent)  # fmt: skip
    lineage = parent.lineage.child(parent.id, parent_run_id=record.parent_run_id, agent=record.agent, role=role)
    return ChildOpening(bounds, lineage, None)


class ChildRelay:
    """Shows one run of a child on its parent's stream, from the run's start to its end.

    Args:
        log: The runtime's event log.
        child: The child session.
        handle: The child's run.
        parent_run_id: The parent's run the child works for (empty: none was going).
        goal: The run's message (None for a resumed run).
    """

    def __init__(self, log: EventLog, child: Session, handle: RunHandle, parent_run_id: str, goal: str | None) -> None:
        self.log = log
        self.child = child
        self.handle = handle
        self.parent_id = child.lineage.parent_session_id
        self.parent_run_id = parent_run_id
        self.goal = goal
        self.after_seq = 0
        self.started = time.monotonic()

    async def start(self) -> None:
        """Record ``child_started`` on the parent's stream; what the child stores from now on is passed up."""
        held = self.log.newest_held(self.child.id)
        if held is None:  # not written through this log yet (reopened, nothing stored since): the store knows
            record = await self.log.store.get_session(self.child.id)
            held = record.last_seq if record is not None else 0
        self.after_seq = held
        goal = self.goal if self.goal is not None else "(resumed after an interruption)"
        await self.log.append(
            ChildStarted(
                session_id=self.parent_id,
                run_id=self.parent_run_id,
                child_session_id=self.child.id,
                child_run_id=self.handle.run_id,
                agent=self.child.lineage.agent,
                goal=goal[:CHILD_TEXT_CHARS],
                depth=self.child.lineage.depth,
            )
        )

    async def follow(self) -> None:
        """Pass the child's events up until cancelled (the run's end); each wait is bounded."""
        while True:
            await self.log.wait_stored(self.child.id, _WAKE_S)
            await self.pass_up()

    async def pass_up(self) -> None:
        """Pass up what the child stored since the last time."""
        while True:
            events = self.log.stored_since(self.child.id, self.after_seq, _PAGE)
            if events is None:
                events = await self.log.store.read_events(self.child.id, after_seq=self.after_seq, limit=_PAGE)
            if not events:
                return
            self.after_seq = max(e.seq or self.after_seq for e in events)
            shown = [copy for e in events if (copy := self._shown(e)) is not None]
            if shown:
                await self.log.append(*shown)
            if len(events) < _PAGE:
                return

    async def finish(self) -> None:
        """Pass up what is left, then record ``child_finished`` with the run's status."""
        await self.pass_up()
        result = self.handle.result
        await self.log.append(
            ChildFinished(
                session_id=self.parent_id,
                run_id=self.parent_run_id,
                child_session_id=self.child.id,
                child_run_id=self.handle.run_id,
                status=self.handle.status,
                reason=result.reason if result is not None else "",
                steps=result.steps if result is not None else 0,
                elapsed_s=round(time.monotonic() - self.started, 3),
                final_text=(result.final_text if result is not None else "")[:CHILD_TEXT_CHARS],
            )
        )

    def _shown(self, event: Event) -> Event | None:
        """What the parent's stream shows of one of the child's events (None: nothing)."""
        here = {"session_id": self.parent_id, "seq": None, "run_id": self.parent_run_id}
        if isinstance(event, ToolCallStarted):
            return ChildActivity(
                session_id=self.parent_id,
                run_id=self.parent_run_id,
                child_session_id=self.child.id,
                child_run_id=event.run_id,
                step=event.step,
                tool=event.tool,
            )
        if isinstance(event, ApprovalRequested | ApprovalDecided | QuestionAsked | QuestionAnswered):
            return event.model_copy(update={**here, "child_session_id": event.child_session_id or self.child.id})
        if isinstance(event, ChildStarted | ChildActivity | ChildFinished):
            return event.model_copy(update=here)  # a grandchild's, already tagged with it
        return None  # the rest (its run's end too: child_finished says it, with the elapsed time) stays the child's
