"""What the host answers about sessions from the store: their records, listing, archiving and rewinding.

A base class of :class:`~orchestrator.runtime.host.SessionHost`: nothing here opens a session; each answer is the
store's, with what this process knows of runs in progress (a session with one is ``active``, and may not be
archived or rewound until it ends).
"""

from __future__ import annotations

from orchestrator.events import SessionArchived
from orchestrator.events_long import TodoItem
from orchestrator.runtime.host_runs import HostError, LiveRuns
from orchestrator.runtime.runtime import Runtime, Session
from orchestrator.runtime.todo import StoredPlans
from orchestrator.store.interface import SessionRecord
from orchestrator.store.rewind import RewindError, RewindResult, rewind

__all__ = ["SessionRecords"]


class SessionRecords:
    """Sessions as the store records them, for a host's clients."""

    runtime: Runtime
    live: LiveRuns
    sessions: dict[str, Session]
    _stored_plans: StoredPlans | None = None

    async def record(self, session_id: str) -> SessionRecord:
        """A session's stored record.

        Raises:
            HostError: no such session.
        """
        record = await self.runtime.log.store.get_session(session_id)
        if record is None:
            raise HostError(f"no session {session_id!r}; list_sessions shows the existing ones")
        return record

    async def todos(self, record: SessionRecord) -> list[TodoItem]:
        """The session's plan: from memory while it is open in this process, else read back from its events."""
        session = self.sessions.get(record.id)
        if session is not None:
            return session.plan.items
        if self._stored_plans is None:
            self._stored_plans = StoredPlans()
        return await self._stored_plans.plan(self.runtime.log.store, record.id, record.last_seq)

    def session_state(self, record: SessionRecord) -> str:
        """``archived``, ``active`` (a run of it is in progress in this process) or ``idle``."""
        if record.archived:
            return "archived"
        return "active" if self.live.of(record.id) else "idle"

    async def list_sessions(self, include_archived: bool = False) -> list[SessionRecord]:
        """Sessions in the store, newest first."""
        return await self.runtime.log.store.list_sessions(include_archived=include_archived)

    async def archive(self, session_id: str) -> SessionRecord:
        """Archive a session (hidden from lists, never deleted).

        Raises:
            HostError: no such session, or a run of it is still going.
        """
        record = await self.record(session_id)
        self.check_idle(session_id)
        if not record.archived:
            await self.runtime.log.append(SessionArchived(session_id=session_id))
        return await self.record(session_id)

    def check_idle(self, session_id: str) -> None:
        """Refuse (HostError) while a run of the session is in progress in this process."""
        if self.live.of(session_id):
            raise HostError(f"session {session_id!r} has a run in progress; cancel it first")

    async def rewind(self, session_id: str, to_run_id: str) -> RewindResult:
        """Restore the session's files as they were before ``to_run_id`` and branch its conversation there.

        Raises:
            HostError: no such session, a run of it is going, or ``to_run_id`` is not one of its runs.
        """
        record = await self.record(session_id)
        self.check_idle(session_id)
        try:
            return await rewind(self.runtime.log, record, to_run_id)
        except RewindError as exc:
            raise HostError(str(exc)) from exc
        except OSError as exc:
            raise HostError(f"rewind stopped: {exc}; files listed before it were restored") from exc
