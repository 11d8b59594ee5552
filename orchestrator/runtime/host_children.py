"""The host's side of child sessions: starting one, bounding its runs' time, and ending them with their parent's.

:mod:`orchestrator.runtime.children` narrows a child's bounds and shows its runs on its parent's stream; this part
of :class:`~orchestrator.runtime.host.SessionHost` (a base class) decides when: a child is opened like any
session, with its bounds; each of its runs is relayed from its start to its end; a run with a ``timeout_s`` is
cancelled past it and ends ``failed``; and a parent's run that ends, however it ends, cancels the runs of its
children that still go, so no child outlives the work it was started for.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from orchestrator.runtime.children import PARENT_ENDED, ChildRelay, ModelChooser, child_opening, timed_out
from orchestrator.runtime.host_runs import HostError, LiveRuns, RunHandle
from orchestrator.runtime.runtime import ChildOpening, Runtime, Session

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from orchestrator.models.base import Model

__all__ = ["MAX_TREE_CHILDREN", "RELAY_FINISH_S", "ChildHost"]

logger = logging.getLogger(__name__)

MAX_TREE_CHILDREN = 64
"""How many child sessions of one top-level session may be busy at once (a run going or queued), at every depth:
a model that spawns children that spawn children (up to 8 levels, 32 at a time) is refused past this, with the
reason, instead of opening sessions until the daemon runs out of memory. Children that ended do not count: they
are idle sessions, closed like any other past the host's cap."""

RELAY_FINISH_S = 10.0
"""How long recording a child's end on its parent's stream may take (a store write) before it is given up."""


class ChildHost:
    """Child sessions over a host's open sessions and live runs."""

    runtime: Runtime
    sessions: dict[str, Session]
    live: LiveRuns

    async def session(self, session_id: str) -> Session:  # pragma: no cover - the host's
        """An open session (the host's method)."""
        raise NotImplementedError

    async def open_child(self, model: Model, opening: ChildOpening) -> Session:  # pragma: no cover - the host's
        """Open a new child session with its bounds in a task of the host's (the host's method)."""
        raise NotImplementedError

    _face: MCPServer | None = None
    max_tree_children = MAX_TREE_CHILDREN
    """How many children of one tree may be busy at once (see :data:`MAX_TREE_CHILDREN`)."""

    def face_server(self) -> MCPServer:
        """Loom's face over this host, built on first use: what sessions' ``subagents`` tools drive children by."""
        if self._face is None:
            from orchestrator.face.server import build_face

            self._face = build_face(self)  # type: ignore[arg-type]  # this is a SessionHost's base
        return self._face

    async def create_child(
        self,
        parent_id: str,
        choose_model: ModelChooser,
        *,
        model: str | None = None,
        agent: str | None = None,
        allow: list[str] | None = None,
        mode: str | None = None,
        cwd: str = "",
    ) -> Session:
        """Open a child of ``parent_id``: its bounds narrowed from the parent's, its context its own.

        Args:
            parent_id: The parent session (opened if it is not).
            choose_model: Builds the child's model (see :data:`~orchestrator.runtime.children.ModelChooser`).
            model: The model spec asked for; None for the agent definition's, else the parent's.
            agent: An agent definition's name (``$LOOM_HOME/agents``, ``<project>/.loom/agents``).
            allow: An allow-list of globs over namespaced tool names, besides the definition's ``tools``.
            mode: The mode asked for; None for the definition's, else the parent's.
            cwd: The child's directory, inside the parent's; empty for the parent's.

        Raises:
            HostError: no such parent, an unknown agent or mode, a request for more than the parent has, or a model
                that cannot be used; the message says which and what would work.
        """
        parent = await self.session(parent_id)
        root = parent.lineage.ancestors[-1] if parent.lineage.ancestors else parent.id
        busy = sum(1 for s in self.sessions.values() if root in s.lineage.ancestors and self.live.of(s.id))
        if busy >= self.max_tree_children:
            raise HostError(
                f"session {root} already has {busy} child sessions running, the most one tree of sessions may have "
                f"at once ({self.max_tree_children}); wait for some to finish, or do the work here"
            )
        going = self.live.of(parent.id)
        opening, definition = await child_opening(
            parent,
            home=self.runtime.home,
            parent_run_id=going[0].run_id if going else "",
            agent=agent,
            allow=allow,
            mode=mode,
            cwd=cwd,
        )
        chosen = choose_model(model, parent.model.name, definition, Path(opening.bounds.cwd))
        return await self.open_child(chosen, opening)

    def relay_for(self, session: Session, handle: RunHandle, goal: str | None) -> ChildRelay | None:
        """The relay of a child's run to its parent's stream (None for a top-level session's run)."""
        if not session.lineage.is_child:
            return None
        going = self.live.of(session.lineage.parent_session_id)
        handle.parent_run_id = going[0].run_id if going else ""
        return ChildRelay(self.runtime.log, session, handle, handle.parent_run_id, goal)

    async def relay_finish(self, relay: ChildRelay) -> None:
        """Record a child run's end on its parent's stream, bounded, even while the run's task is being cancelled."""
        with anyio.CancelScope(shield=True), anyio.move_on_after(RELAY_FINISH_S):
            try:
                await relay.finish()
            except Exception as exc:  # a store failure loses the parent's view of the end, never the host
                logger.warning("the end of child run %s was not shown to its parent: %s", relay.handle.run_id, exc)

    async def deadline(self, session: Session, handle: RunHandle) -> None:
        """Cancel ``handle`` when its ``timeout_s`` has passed, so that it ends ``failed`` saying so."""
        assert handle.timeout_s is not None
        await anyio.sleep(handle.timeout_s)
        session.endings[handle.run_id] = ("failed", timed_out(handle.timeout_s))
        handle.scope.cancel()

    async def parents_first(self, run_ids: list[str]) -> list[str]:
        """``run_ids`` ordered by their sessions' depth in the tree (top-level sessions' runs first), else as given."""
        store = self.runtime.log.store
        depth: dict[str, int] = {}

        async def level(session_id: str) -> int:
            if session_id not in depth:
                depth[session_id] = 1  # until known: a store that names a session its own ancestor ends here
                record = await store.get_session(session_id)
                parent = record.parent_session_id if record is not None else ""
                depth[session_id] = 1 + (await level(parent) if parent else 0)
            return depth[session_id]

        keyed: list[tuple[int, int, str]] = []
        for index, run_id in enumerate(run_ids):
            run = await store.get_run(run_id)
            keyed.append((await level(run.session_id) if run is not None else 1, index, run_id))
        return [run_id for _, _, run_id in sorted(keyed)]

    def rebase_children(self, parent: Session) -> None:
        """Give ``parent``'s open descendants bounds under its new ones (after its mode changed), top down.

        A parent made stricter makes its children stricter at once, in the runs they have going; one made freer
        frees them no further than their own levels say.
        """
        by_depth = sorted(
            (s for s in self.sessions.values() if parent.id in s.lineage.ancestors), key=lambda s: s.lineage.depth
        )
        for child in by_depth:
            above = self.sessions.get(child.lineage.parent_session_id)
            if above is not None:
                child.approvals.bounds = child.approvals.bounds.rebased(above.approvals.bounds)

    def end_children(self, parent: Session, handle: RunHandle) -> None:
        """Cancel the runs of ``parent``'s children that work for ``handle`` (the parent's run, which has ended)."""
        for child in list(self.sessions.values()):
            if child.lineage.parent_session_id != parent.id:
                continue
            for run in self.live.of(child.id):
                if run.parent_run_id == handle.run_id:
                    child.endings.setdefault(run.run_id, ("cancelled", PARENT_ENDED))
                    run.scope.cancel()
