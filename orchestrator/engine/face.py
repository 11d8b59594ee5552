"""The face's side of the DBOS engine: it enqueues runs and answers their approvals; workers drive them.

``loom serve`` over the shared database accepts a message as the embedded daemon does (``run_queued`` is stored
first, so a crash loses nothing), then enqueues the run's workflow instead of driving it. Whatever worker takes it
stores its events in the same database, where every face reads them (:mod:`orchestrator.engine.feed` wakes the
followers). An approval is answered by a durable message to the run's workflow, which the worker holding the run
(or the one that takes it over) receives and records.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from dbos import DBOSClient, DBOSPortableJSONSerializer, EnqueueOptions

from orchestrator.engine.errors import EngineError
from orchestrator.engine.version import LOOP_VERSION
from orchestrator.engine.waits import DECISIONS, decision_message
from orchestrator.engine.workflow import QUEUE, WORKFLOW
from orchestrator.events import ApprovalDecided, ApprovalRequested, RunFinished, RunQueued
from orchestrator.runtime.owner import WORKER_OWNER

if TYPE_CHECKING:
    from orchestrator.engine.settings import EngineSettings
    from orchestrator.store.eventlog import EventLog


CANCEL_WAKE = {"cancelled": "the run was cancelled"}
"""What a cancel sends to a cancelled run's waiting approvals: not a decision, only a wake-up (see ``cancel``)."""


class RemoteRuns:
    """Enqueue runs, answer approvals and cancel runs that DBOS workers drive."""

    def __init__(self, log: EventLog, client: DBOSClient) -> None:
        self.log = log
        self.client = client

    async def enqueue(self, session_id: str, run_id: str, text: str, max_steps: int) -> None:
        """Record the message (``run_queued``) and put the run on the queue; a worker picks it up.

        One session's runs go one at a time across every worker (the queue is partitioned by session).
        """
        await self.log.append(
            RunQueued(session_id=session_id, run_id=run_id, text=text, max_steps=max_steps, owner=WORKER_OWNER)
        )
        options: EnqueueOptions = {
            "workflow_name": WORKFLOW,
            "queue_name": QUEUE,
            "workflow_id": run_id,
            "app_version": LOOP_VERSION,
            "queue_partition_key": session_id,
        }
        await self.client.enqueue_async(options, run_id, session_id, text, max_steps)

    async def answer(
        self, session_id: str, approval_id: str, decision: str, reason: str, decided_by: str
    ) -> ApprovalRequested:
        """Send a decision to the run waiting on ``approval_id``; the worker records it.

        Raises:
            EngineError: no such approval is waiting (unknown, decided already, or its run has ended).
        """
        if decision not in DECISIONS:
            raise EngineError(f"unknown decision {decision!r}; use one of {', '.join(DECISIONS)}")
        request = await self.waiting(session_id, approval_id)
        message = decision_message(decision, reason, decided_by)
        await self.client.send_async(request.run_id, message, topic=approval_id)
        return request

    async def waiting(self, session_id: str, approval_id: str) -> ApprovalRequested:
        """The request ``approval_id`` of ``session_id`` if it still waits for a decision.

        Raises:
            EngineError: it does not.
        """
        events = await self.log.store.read_events(session_id)
        request = next((e for e in events if isinstance(e, ApprovalRequested) and e.approval_id == approval_id), None)
        if request is None:
            raise EngineError(f"approval {approval_id!r} is not pending (unknown, or already decided)")
        decided = any(isinstance(e, ApprovalDecided) and e.approval_id == approval_id for e in events)
        ended = any(isinstance(e, RunFinished) and e.run_id == request.run_id for e in events)
        if decided or ended:
            raise EngineError(f"approval {approval_id!r} is not pending (unknown, or already decided)")
        return request

    async def cancel(self, run_id: str, session_id: str) -> None:
        """Cancel the run's workflow: its worker stops it at its next step and records it ``cancelled``.

        A run waiting for an approval takes no step until a message comes (DBOS's cancel does not wake a ``recv``),
        so each approval it waits for is sent a wake-up that is no decision: the wait takes its next round, which
        finds the workflow cancelled. Without it the run would sit ``awaiting_approval`` until its wait timed out.
        """
        await self.client.cancel_workflow_async(run_id)
        events = await self.log.store.read_events(session_id, run_id=run_id)
        decided = {e.approval_id for e in events if isinstance(e, ApprovalDecided)}
        for request in events:
            if isinstance(request, ApprovalRequested) and request.approval_id not in decided:
                await self.client.send_async(run_id, CANCEL_WAKE, topic=request.approval_id)

    async def engine_status(self, run_id: str) -> str:
        """DBOS's status of the run's workflow (``PENDING``, ``SUCCESS``, ``CANCELLED``, ``ERROR``, ...), or empty."""
        try:
            handle: Any = await self.client.retrieve_workflow_async(run_id)
            info = await handle.get_status()
        except Exception:  # no such workflow (DBOS raises its own error for that)
            return ""
        return str(info.status)

    async def holder(self, run_id: str) -> str:
        """The worker executing ``run_id`` now, from DBOS's record (empty: queued, finished or unknown)."""
        status: Any = await self.client.retrieve_workflow_async(run_id)
        info = await status.get_status()
        return str(info.executor_id or "") if info.status == "PENDING" else ""


@contextlib.asynccontextmanager
async def remote_runs(settings: EngineSettings, log: EventLog) -> AsyncIterator[RemoteRuns]:
    """A :class:`RemoteRuns` over ``settings``' database while the context is open.

    Raises:
        EngineError: the database cannot be reached, or no worker has created DBOS's tables in it yet.
    """
    try:
        client = await anyio.to_thread.run_sync(_client, settings.database)
    except Exception as exc:
        raise EngineError(
            f"cannot reach the engine's database {settings.shown_database}: {type(exc).__name__}; start Postgres, "
            "and start a worker once (`loom worker`) so that it creates the queue's tables"
        ) from None
    try:
        yield RemoteRuns(log, client)
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(client.destroy)


def _client(url: str) -> DBOSClient:
    return DBOSClient(system_database_url=url, serializer=DBOSPortableJSONSerializer(), application_name="loom")
