"""The face's view of runs that DBOS workers drive: a handle per run, kept in step with the shared store.

With the DBOS engine the host (``loom serve``) drives no run itself. :meth:`SessionHost.start_run` enqueues the
run (:class:`~orchestrator.engine.face.RemoteRuns`) and :func:`follow_remote` keeps its handle as if it ran here:
its status, its end, and the approvals it waits for, mirrored into the face's session so that every client sees and
answers them as it does on the embedded engine. The events come from the store, whichever worker wrote them; the
feed (:mod:`orchestrator.engine.feed`) wakes this follower when they do, and a bounded wait covers a lost wake-up.
A face that opens (or restarts) follows the runs the workers already hold (:func:`adopt_remote`), since they
go on across its restart, and it resumes none of them itself (:func:`refuse_resume`): the workers do.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio

from orchestrator.events import ApprovalDecided, ApprovalRequested, RunFinished, RunStarted, RunStatus
from orchestrator.loop.approvals import PendingApproval
from orchestrator.runtime.owner import WORKER_OWNER
from orchestrator.runtime.runs import RunResult
from orchestrator.store.interface import RunRecord

if TYPE_CHECKING:
    from orchestrator.engine.face import RemoteRuns
    from orchestrator.runtime.host import SessionHost
    from orchestrator.runtime.host_runs import RunHandle
    from orchestrator.runtime.session import Session

logger = logging.getLogger(__name__)

POLL_S = 1.0
"""The longest a follower waits without a wake-up before it reads the store again."""
CHECK_EVERY = 5
"""Quiet polls between asking DBOS whether it ended the run without an end on record."""
END_GRACE_S = 10.0
"""How long an end DBOS knows of may go unrecorded before the face records it (a worker may be about to)."""
_DBOS_ENDS: dict[str, tuple[RunStatus, str]] = {
    "ERROR": ("failed", "the engine ended this run with an error its worker did not record"),
    "CANCELLED": ("cancelled", "the engine cancelled this run and no worker recorded it"),
    "MAX_RECOVERY_ATTEMPTS_EXCEEDED": ("failed", "its workers died on it too many times, so the engine gave it up"),
}


async def follow_remote(session: Session, handle: RunHandle, remote: RemoteRuns | None = None) -> None:
    """Follow ``handle``'s run in the store until it ends; mirror its waiting approvals into ``session``.

    It follows in the handle's scope, which the host cancels when it closes: the worker goes on with the run, and a
    follower waiting for its end must not keep the face from stopping.
    """
    mirrored = session.approvals.pending
    try:
        with handle.scope:
            await _follow(session, handle, remote)
    finally:
        for approval_id in [k for k, p in mirrored.items() if p.run_id == handle.run_id]:
            mirrored.pop(approval_id, None)
        handle.done.set()


async def _follow(session: Session, handle: RunHandle, remote: RemoteRuns | None) -> None:
    log = session.log
    cursor = 0
    idle = 0
    ended_at: float | None = None
    mirrored = session.approvals.pending
    while True:
        events = await log.store.read_events(session.id, after_seq=cursor)
        if events:
            cursor = events[-1].seq or cursor
        for event in events:
            if getattr(event, "run_id", None) != handle.run_id:
                continue
            if isinstance(event, RunStarted) and handle.status == "queued":
                handle.status = "running"
            elif isinstance(event, ApprovalRequested):
                mirrored[event.approval_id] = PendingApproval(
                    event.approval_id,
                    session.id,
                    event.run_id,
                    event.call_id,
                    event.tool,
                    event.arguments,
                    event.reason,
                    event.kind,
                )
            elif isinstance(event, ApprovalDecided):
                decided = mirrored.pop(event.approval_id, None)
                if decided is not None:
                    decided.done.set()
            elif isinstance(event, RunFinished):
                handle.status = event.status
                handle.result = RunResult(event.run_id, event.status, event.reason, event.final_text, event.steps)
                return
        idle = 0 if events else idle + 1
        if remote is not None and idle and idle % CHECK_EVERY == 0:
            ended_at = await _unrecorded_end(remote, session, handle, ended_at)
            if handle.result is not None:
                return
        await log.wait_stored(session.id, POLL_S)


async def _unrecorded_end(
    remote: RemoteRuns, session: Session, handle: RunHandle, ended_at: float | None
) -> float | None:
    """Record the end of a run DBOS ended without its worker recording it; returns when that was first seen.

    A worker records every end it reaches, but DBOS can end a workflow on its own (its recovery limit, an error
    raised past Loom's handlers), and a follower must not wait for ever for an end no one will store. The face
    records it after a grace, in case the worker is about to.
    """
    status = await remote.engine_status(handle.run_id)
    if status not in _DBOS_ENDS:
        return None
    now = anyio.current_time()
    if ended_at is None or now - ended_at < END_GRACE_S:
        return ended_at if ended_at is not None else now
    final, why = _DBOS_ENDS[status]
    reason = f"{why} (DBOS status {status}); see `loom workers` and the workers' logs, then send a new message"
    ended = RunFinished(
        session_id=session.id, run_id=handle.run_id, status=final, reason=reason, final_text="", steps=0
    )
    await session.log.append(ended)
    handle.status = final
    handle.result = RunResult(handle.run_id, final, reason, "", 0)
    return ended_at


async def adopt_remote(host: SessionHost) -> list[str]:
    """Follow the runs the workers hold or have queued, as a face that opens (or restarts) finds them.

    On the embedded engine a restart interrupts the runs; on this one they go on, so the face must show their
    approvals and ends as it does for the runs it enqueued itself: otherwise a run waiting for a decision when its
    face restarted could never be answered. A run whose session cannot be opened here is logged and left.

    Returns:
        The ids of the runs followed.
    """
    from orchestrator.runtime.host import HostError
    from orchestrator.runtime.host_runs import RunHandle

    followed: list[str] = []
    store = host.runtime.log.store
    for status in ("running", "queued"):
        for run in await store.list_runs_with_status(status):
            if not run.owner.startswith(WORKER_OWNER) or run.id in host.runs:
                continue
            try:
                session = await host.session(run.session_id)
            except HostError as exc:
                logger.warning("not following run %s of the workers: %s", run.id, exc)
                continue
            handle = RunHandle(run_id=run.id, session_id=session.id, status=status)
            assert host._tg is not None, "the host is not open"
            host.runs[run.id] = handle
            host.live.add(handle)
            host._tg.start_soon(host._follow_remote, session, handle)
            followed.append(run.id)
    return followed


def refuse_resume(record: RunRecord) -> str:
    """Why the face of the DBOS engine does not resume ``record``'s run itself (the host raises it to the caller).

    A worker drives every run of this engine: a run whose worker stopped is taken over by another, and the face has
    no journal to go on with one; driving it here would run it beside the workers, outside the queue.
    """
    if record.status in ("running", "queued"):
        return (
            f"run {record.id!r} is {record.status} on the dbos engine: a worker carries it on (and another worker "
            "takes it over if that one stops), so it needs no resume_run; get_run or read_events follow it"
        )
    return (
        f"run {record.id!r} is {record.status}, and resume_run cannot continue it on the dbos engine, whose workers "
        "resume runs themselves when a worker stops; send the session a new message to go on from here"
    )


async def answer_remote(remote: RemoteRuns, pending: PendingApproval, decision: str, reason: str, who: str) -> None:
    """Send a decision on a mirrored approval to the worker holding its run; the first answer here wins."""
    await remote.answer(pending.session_id, pending.approval_id, decision, reason, who)
    # Decided as far as this face goes: a second answer is refused at once, and the mirror drops it when the worker
    # records the decision.
    pending.decision = decision  # type: ignore[assignment]
    pending.decision_reason, pending.decided_by = reason, who


async def cancel_remote(remote: RemoteRuns, handle: RunHandle, timeout_s: float = 10.0) -> None:
    """Cancel the run's workflow and wait (bounded) until its worker records the end."""
    queued = await remote.engine_status(handle.run_id) == "ENQUEUED"
    await remote.cancel(handle.run_id, handle.session_id)
    if queued and not await _started(remote, handle):
        # No worker took it, so none will record its end: the face does (the follower then sees it).
        ended = RunFinished(
            session_id=handle.session_id,
            run_id=handle.run_id,
            status="cancelled",
            reason="cancelled before a worker took it",
            final_text="",
            steps=0,
        )
        await remote.log.append(ended)
    with anyio.move_on_after(timeout_s):
        await handle.done.wait()


async def _started(remote: RemoteRuns, handle: RunHandle) -> bool:
    events = await remote.log.store.read_events(handle.session_id, run_id=handle.run_id)
    return any(isinstance(e, RunStarted | RunFinished) for e in events)
