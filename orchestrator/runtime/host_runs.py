"""What the host's clients read and decide about runs: their views, waiting, cancelling, and approvals.

:class:`~orchestrator.runtime.host.SessionHost` starts sessions and runs; this part of it (a base class,
:class:`RunDesk`) answers about them: a run's state whether it started in this process or before a
restart, a bounded wait for its end, its cancellation, and the approvals its calls wait for.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

import anyio

from orchestrator.engine.errors import EngineError
from orchestrator.events import RunStatus
from orchestrator.loop.approvals import ApprovalError, Decision, PendingApproval
from orchestrator.runtime.host_remote import answer_remote, cancel_remote
from orchestrator.runtime.runtime import RunResult, Runtime, Session
from orchestrator.store.interface import RunRecord

if TYPE_CHECKING:
    from orchestrator.engine.face import RemoteRuns


class HostError(Exception):
    """A request the host cannot serve (unknown id, bad directory); the message says what to do."""


@dataclass
class RunHandle:
    """A run started in this process."""

    run_id: str
    session_id: str
    status: RunStatus = "running"
    result: RunResult | None = None
    done: anyio.Event = field(default_factory=anyio.Event)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    headless: bool | None = None
    """For a resume: whether nobody can answer its reviews (None: as the session is)."""
    timeout_s: float | None = None
    """The run's own deadline, counted from when it starts (None: none): past it, it ends ``failed``."""
    parent_run_id: str = ""
    """For a child's run: the parent's run it works for (ending that run cancels this one)."""


class LiveRuns:
    """The runs of this process not done yet, by session, in the order they were started.

    An open session keeps its finished runs' handles (views of them need no store read) until it closes, so
    "has this session a run going" must not walk every handle kept: a long session made every send slower.
    """

    def __init__(self) -> None:
        self._by_session: dict[str, dict[str, RunHandle]] = {}

    def add(self, handle: RunHandle) -> None:
        """A run started (or was queued)."""
        self._by_session.setdefault(handle.session_id, {})[handle.run_id] = handle

    def discard(self, handle: RunHandle) -> None:
        """A run is done (or never started)."""
        runs = self._by_session.get(handle.session_id)
        if runs is not None and runs.get(handle.run_id) is handle:
            del runs[handle.run_id]
            if not runs:
                del self._by_session[handle.session_id]

    def of(self, session_id: str) -> list[RunHandle]:
        """The session's runs in progress or queued, oldest first."""
        return [h for h in self._by_session.get(session_id, {}).values() if not h.done.is_set()]

    def sessions(self) -> set[str]:
        """The sessions with a run in progress or queued."""
        return {sid for sid, runs in self._by_session.items() if any(not h.done.is_set() for h in runs.values())}


@dataclass(frozen=True, slots=True)
class RunView:
    """A run as a client sees it, whether it started in this process or before a restart."""

    run_id: str
    session_id: str
    status: str
    reason: str
    final_text: str


class RunDesk:
    """Run views and approvals over a host's open sessions and the runs it started."""

    runtime: Runtime
    sessions: dict[str, Session]
    runs: dict[str, RunHandle]
    live: LiveRuns
    remote: RemoteRuns | None

    async def view(self, run_id: str) -> RunView:
        """A run's current state, from this process or the store.

        Raises:
            HostError: no such run.
        """
        handle = self.runs.get(run_id)
        if handle is not None:
            status: str = handle.status
            waiting = self.pending_under(run_id) if status == "running" else []
            if any(p.kind == "review" for p in waiting):
                status = "needs_review"
            elif waiting:
                status = "awaiting_approval"
            result = handle.result
            return RunView(
                run_id, handle.session_id, status, result.reason if result else "", result.final_text if result else ""
            )
        record: RunRecord | None = await self.runtime.log.store.get_run(run_id)
        if record is None:
            raise HostError(f"no run {run_id!r}; read_events or list_sessions show the existing ones")
        return RunView(record.id, record.session_id, record.status, record.reason, record.final_text)

    async def wait(self, run_id: str, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` for a run of this process to end (returns at once for others)."""
        handle = self.runs.get(run_id)
        if handle is None:
            return
        with anyio.move_on_after(timeout_s):
            await handle.done.wait()

    async def cancel(self, run_id: str) -> RunView:
        """Cancel a run and wait (bounded) until it is recorded.

        Raises:
            HostError: no such run.
        """
        handle = self.runs.get(run_id)
        if handle is None:
            return await self.view(run_id)  # finished before this process, nothing to cancel
        if self.remote is not None and not handle.done.is_set():
            await cancel_remote(self.remote, handle)
            return await self.view(run_id)
        handle.scope.cancel()
        with anyio.move_on_after(10):
            await handle.done.wait()
        return await self.view(run_id)

    # -- approvals -----------------------------------------------------------------------------------

    def pending(self, *, session_id: str | None = None, run_id: str | None = None) -> list[PendingApproval]:
        """Approvals waiting for a decision, oldest first; a session's include its descendants' (its children's)."""
        found = [
            p
            for s in self.sessions.values()
            if session_id is None or s.id == session_id or session_id in s.lineage.ancestors
            for p in s.approvals.pending.values()
            if p.decision is None and (run_id is None or p.run_id == run_id)
        ]
        return found

    def pending_under(self, run_id: str) -> list[PendingApproval]:
        """Approvals a run waits for: its own, and those of the runs of children working for it (and theirs)."""
        found = self.pending(run_id=run_id)
        for session in self.sessions.values():
            if session.lineage.is_child:
                for child_run in self.live.of(session.id):
                    if child_run.parent_run_id == run_id:
                        found += self.pending_under(child_run.run_id)
        return found

    def pending_approval(self, approval_id: str) -> PendingApproval:
        """One pending approval by id.

        Raises:
            HostError: unknown, or already decided.
        """
        for found in self.pending():
            if found.approval_id == approval_id:
                return found
        raise HostError(f"approval {approval_id!r} is not pending (unknown, or already decided)")

    async def decide(self, approval_id: str, decision: str, reason: str, decided_by: str) -> PendingApproval:
        """Decide a pending approval; the first decision wins.

        Raises:
            HostError: unknown or already decided approval, or an unknown decision.
        """
        if decision not in ("approve_once", "approve_session", "deny"):
            raise HostError(f"unknown decision {decision!r}; use approve_once, approve_session or deny")
        pending = self.pending_approval(approval_id)
        if self.remote is not None:  # a worker's run waits on it: the decision goes to the worker, which records it
            try:
                await answer_remote(self.remote, pending, decision, reason, decided_by)
            except EngineError as exc:
                raise HostError(str(exc)) from exc
            return pending
        try:
            return await self.sessions[pending.session_id].approvals.decide(
                approval_id, cast(Decision, decision), reason, decided_by
            )
        except ApprovalError as exc:
            raise HostError(str(exc)) from exc
