"""Which sessions a subagents server may act on, and the run of each it reports on.

A server belongs to one parent session. Its children are the sessions it started and, after a restart (a new
server for the same parent, its memory empty), every session the face records with that parent: a child's
latest run is then found in its events. Any other id is refused, so a model cannot read, steer or cancel a
session that is not its own child.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from mcp.server.mcpserver.exceptions import ToolError

from clients.loom import FaceError, LoomClient
from orchestrator.events import Event, RunQueued, RunStarted
from servers.subagents._summary import FINISHED

__all__ = ["MAX_GOING", "Child", "Children", "read_run_events"]

PAGE = 1000
"""Events per read_events call (the face's most)."""
MAX_GOING = 32
"""Children of one server that may be going at once (as many as one spawn_many starts)."""
MAX_PAGES = 50
"""A child's run is read in at most this many pages; a longer one is summarised from what was read."""


@dataclass
class Child:
    """The run of a child a server reports on: its latest."""

    run_id: str
    agent: str
    after_seq: int
    """No event of the run is as old as this (the child's newest event when the run was sent)."""
    status: str
    """As last seen (a child whose last seen status is finished is not waited for by default)."""


async def read_run_events(loom: LoomClient, session_id: str, after_seq: int) -> list[Event]:
    """A session's stored events after ``after_seq``, oldest first (bounded: :data:`MAX_PAGES` pages)."""
    events: list[Event] = []
    for _ in range(MAX_PAGES):
        page = await loom.read_events(session_id, after_seq=after_seq, limit=PAGE)
        events.extend(page.events)
        if not page.events or page.next_after_seq <= after_seq:
            break
        after_seq = page.next_after_seq
    return events


class Children:
    """The children of one parent session (or, with none, the sessions this server started)."""

    def __init__(self, parent: str | None, *, max_going: int = MAX_GOING) -> None:
        self._parent = parent
        self._max_going = max_going
        self._known: dict[str, Child] = {}
        self._listed = False
        self._starting = 0

    def track(self, child_id: str, child: Child) -> None:
        """Record a run this server started (the child's newest)."""
        self._known[child_id] = child

    @contextlib.asynccontextmanager
    async def room(self, loom: LoomClient) -> AsyncIterator[None]:
        """A place for one more child going at once, held while it is started.

        Raises:
            ToolError: ``max_going`` children are still going (a model spawning in a loop is stopped here).
        """
        going = [c for c in self._known.values() if c.status not in FINISHED]
        if len(going) + self._starting >= self._max_going:
            for child in going:  # statuses are as last seen: look again before refusing
                child.status = (await loom.get_run(child.run_id)).status
            going = [c for c in going if c.status not in FINISHED]
        if len(going) + self._starting >= self._max_going:
            raise ToolError(
                f"{self._max_going} of your children are still going; wait for them or cancel some before starting more"
            )
        self._starting += 1
        try:
            yield
        finally:
            self._starting -= 1

    async def own(self, loom: LoomClient, child_id: str) -> Child:
        """The child ``child_id`` and its latest run.

        Raises:
            ToolError: it is not a child of this session, or it has no run.
        """
        known = self._known.get(child_id)
        if known is not None:
            return known
        not_mine = f"{child_id!r} is not one of your children; spawn one, or pass a child_id spawn returned"
        if self._parent is None:
            raise ToolError(not_mine)
        try:
            info = await loom.get_session(child_id)
        except FaceError as exc:
            raise ToolError(not_mine) from exc
        if info.parent_session_id != self._parent:
            raise ToolError(not_mine)
        found = await self._recover(loom, child_id, info.agent)
        self._known[child_id] = found
        return found

    async def _recover(self, loom: LoomClient, child_id: str, agent: str) -> Child:
        """A child this server did not start (or forgot in a restart): its latest run, from its events."""
        run_id, after_seq, previous = "", 0, 0
        for event in await read_run_events(loom, child_id, 0):
            if isinstance(event, RunQueued | RunStarted) and event.run_id != run_id:
                run_id, after_seq = event.run_id, previous
            previous = event.seq or previous
        if not run_id:
            raise ToolError(f"child {child_id} has not been given a task yet")
        status = (await loom.get_run(run_id)).status
        return Child(run_id, agent, after_seq, status)

    async def resolve(self, loom: LoomClient, child_ids: list[str] | None) -> dict[str, Child]:
        """The children a wait is for: those named (each must be one), else every one still going."""
        if child_ids is not None:
            return {child_id: await self.own(loom, child_id) for child_id in dict.fromkeys(child_ids)}
        going = {k: c for k, c in self._known.items() if c.status not in FINISHED}
        if self._parent is not None and not self._listed:
            # A new server for a parent that had children (Loom restarted) knows none of them: the face does. Once
            # is enough: the children started since are this server's own. Besides those still going, the children
            # the parent's current run started are its to collect: a wait the resumed run calls again must report
            # the child that finished before the crash too, as the wait the crash cut off would have.
            self._listed = True
            current = await self._current_run(loom, self._parent)
            for info in await loom.list_sessions():
                if info.parent_session_id != self._parent or info.session_id in self._known:
                    continue
                if info.state == "active" or (current and info.parent_run_id == current):
                    going[info.session_id] = await self.own(loom, info.session_id)
        return going

    @staticmethod
    async def _current_run(loom: LoomClient, session_id: str) -> str:
        """The run of the session's newest event (while a tool of its run is called: that run), else ""."""
        last_seq = (await loom.get_session(session_id)).last_seq
        if last_seq <= 0:
            return ""
        page = await loom.read_events(session_id, before_seq=last_seq + 1, limit=1)
        return next((run for e in reversed(page.events) if (run := getattr(e, "run_id", None))), "")
