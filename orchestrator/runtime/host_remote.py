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

from orchestrator.events import ApprovalDecided, ApprovalRequested, RunFinished, RunStarted
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


async def follow_remote(session: Session, handle: RunHandle) -> None:
    """Follow ``handle``'s run in the store until it ends; mirror its waiting approvals into ``session``.

    It follows in the handle's scope, which the host cancels when it closes: the worker goes on with the run, and a
    follower waiting for its end must not keep the face from stopping.
    """
    mirrored = session.approvals.pending
    try:
        with handle.scope:
            await _follow(session, handle)
    finally:
        for approval_id in [k for k, p in mirrored.items() if p.run_id == handle.run_id]:
            mirrored.pop(approval_id, None)
        handle.done.set()


async def _follow(session: Session, handle: RunHandle) -> None:
    log = session.log
    cursor = 0
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
        await log.wait_stored(session.id, POLL_S)


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
    await remote.cancel(handle.run_id, handle.session_id)
    with anyio.move_on_after(timeout_s):
        await handle.done.wait()
