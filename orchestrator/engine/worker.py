"""A worker of the DBOS engine: ``loom worker`` takes runs from the shared queue and drives them.

The worker opens a runtime over the shared store (the same servers, policy and config as any Loom process), launches
DBOS in this event loop's thread (so DBOS runs the workflows on this loop, beside the sessions' servers), and
serves ``loom_run`` (:mod:`orchestrator.engine.workflow`) through :class:`Worker`. Its heartbeat and the supervision
of the other workers (whose runs it takes over when they die) are :mod:`orchestrator.engine.pool`'s.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import psycopg
from dbos import DBOS

from orchestrator.context.history import rebuild_history
from orchestrator.engine.dbos_private import WorkflowCancelled, WorkflowConflict, recover_executors, stop_dequeuing
from orchestrator.engine.dbos_steps import DBOSSteps, NeedsReview
from orchestrator.engine.feed import LivePublisher
from orchestrator.engine.journal import JournalledEventLog, ReplayDiverged, RunJournal, journalling
from orchestrator.engine.pool import WorkerPool
from orchestrator.engine.version import LOOP_VERSION
from orchestrator.engine.waits import DurableWaiter
from orchestrator.engine.workflow import QUEUE, QUEUE_POLL_S, dbos_config, serve_runs
from orchestrator.events import Event, Notice, RunFinished, RunStarted, SessionCreated, event_run_id
from orchestrator.loop.approvals import approved_for_session
from orchestrator.runtime.host_runs import HostError
from orchestrator.runtime.owner import WORKER_OWNER

if TYPE_CHECKING:
    from orchestrator.config import LoomConfig
    from orchestrator.engine.settings import EngineSettings
    from orchestrator.runtime.host import SessionHost

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class Held:
    """A run this worker is executing right now."""

    run_id: str
    session_id: str
    journal: RunJournal


class Worker:
    """One worker process's side of the ``loom_run`` workflow."""

    def __init__(
        self,
        host: SessionHost,
        worker_id: str,
        pool: WorkerPool | None = None,
        fence: psycopg.AsyncConnection[Any] | None = None,
    ) -> None:
        self.host = host
        self.worker_id = worker_id
        self._fence = fence
        self._fence_lock = anyio.Lock()
        self.pool = pool
        """This worker's membership of the pool (None in a process that only executes, as some tests do)."""
        self.held: dict[str, Held] = {}
        """The runs being executed here, by id (what the pool reports, and what a test watches)."""
        self.finished: list[tuple[str, RunJournal]] = []
        """The executions this worker completed (run id and its journal): how many steps replayed, which ran."""

    @property
    def owner(self) -> str:
        """What a run records as its driver while this worker holds it."""
        return f"{WORKER_OWNER}{self.worker_id}"

    async def execute(self, run_id: str, session_id: str, text: str, max_steps: int) -> dict[str, Any]:
        """Run ``run_id`` of ``session_id`` to its end, or replay its recorded steps and go on where they stop."""
        log = self.host.runtime.log
        try:
            session = await self.host.session(session_id)
        except HostError as exc:  # its directory or model is gone on this machine: say so on the run's record
            return await self._end(session_id, run_id, "failed", f"worker {self.worker_id} cannot open it: {exc}")
        events = await log.store.read_events(session_id)
        created = events[0] if events and isinstance(events[0], SessionCreated) else None
        if created is not None and created.headless and not session.approvals.headless:
            # Opened headless by its face (`loom run`): nobody answers its approvals here either.
            session.approvals.bounds = dataclasses.replace(session.approvals.bounds, headless=True)
        mine = [e for e in events if event_run_id(e) == run_id]
        ended = next((e for e in mine if isinstance(e, RunFinished)), None)
        if ended is not None:  # its end is on record: a duplicate execution has nothing left to do
            return {"status": ended.status, "reason": ended.reason, "final_text": ended.final_text}
        recovering = any(isinstance(e, RunStarted) for e in mine)
        before = _before(events, run_id)
        journal = RunJournal(run_id, session_id, recovering, fence=lambda: self.holds(run_id))
        journal.remember(mine)
        # The session as it stood when the run began, whatever this process last saw of it: another worker may
        # have run its later runs, and a replay must start where the first execution started.
        session.history[:] = rebuild_history(before)
        session.approvals.allowed_tools = approved_for_session(before)
        session.approvals.waiter = DurableWaiter()
        session.steps = DBOSSteps(headless=session.approvals.headless)
        session.owner = lambda: self.owner
        self.held[run_id] = Held(run_id, session_id, journal)
        try:
            if recovering:
                await self._taken_over(session_id, run_id)
            stopped: tuple[str, str] | None = None
            steps = 0
            try:
                with journalling(journal):
                    result = await session.run(text, max_steps=max_steps, run_id=run_id)
            except* ReplayDiverged as group:
                stopped = ("failed", str(group.exceptions[0]))
            except* NeedsReview as group:
                first = group.exceptions[0]
                assert isinstance(first, NeedsReview)
                stopped, steps = ("needs_review", _in_doubt(first.use.name)), first.step
            except* WorkflowCancelled:
                stopped = ("cancelled", "cancelled")
            except* WorkflowConflict as group:
                # A cancel clears the workflow's owner, and a step recorded after it fails this way; anything else
                # (another executor holds the run now) is not this worker's to record.
                if not await _cancelled(run_id):
                    raise group.exceptions[0] from None
                stopped = ("cancelled", "cancelled")
            except* Exception as group:
                # The run cannot go on here (its directory is gone, say): its end is on record, not only in DBOS.
                logger.warning("run %s failed on worker %s", run_id, self.worker_id, exc_info=group)
                stopped = ("failed", f"the worker could not run it: {group.exceptions[0]}")
            if stopped is not None:
                return await self._end(session_id, run_id, *stopped, steps=steps)
            self.finished.append((run_id, journal))
            return {"status": result.status, "reason": result.reason, "final_text": result.final_text}
        finally:
            self.held.pop(run_id, None)

    async def holds(self, run_id: str) -> bool:
        """Whether DBOS has ``run_id`` running under this worker right now (True when not checked)."""
        if self._fence is None:
            return True
        async with self._fence_lock:  # one connection, one query at a time
            cursor = await self._fence.execute(
                "SELECT status, executor_id FROM dbos.workflow_status WHERE workflow_uuid = %s", (run_id,)
            )
            row = await cursor.fetchone()
        return row is not None and row[0] == "PENDING" and row[1] == self.worker_id

    async def _taken_over(self, session_id: str, run_id: str) -> None:
        log = self.host.runtime.log
        assert isinstance(log, JournalledEventLog)
        text = (
            f"worker {self.worker_id} took over run {run_id}: the worker that held it stopped; the steps it had "
            "finished are not run again"
        )
        await log.append_now(Notice(session_id=session_id, run_id=run_id, text=text))

    async def _end(self, session_id: str, run_id: str, status: str, reason: str, *, steps: int = 0) -> dict[str, Any]:
        # Outside the journal: the run's end after a divergence, a review nobody can give, or a cancel is this
        # execution's own record, and the journal cannot take another step.
        log = self.host.runtime.log
        assert isinstance(log, JournalledEventLog)
        session = self.host.sessions.get(session_id)
        if session is not None:
            session.history[:] = []  # rebuilt from the store by the next execution, as every execution does
        ended = RunFinished(
            session_id=session_id, run_id=run_id, status=status, reason=reason, final_text="", steps=steps
        )
        with anyio.CancelScope(shield=True):
            await log.append_now(ended)
        return {"status": status, "reason": reason, "final_text": ""}


async def _cancelled(run_id: str) -> bool:
    """Whether DBOS has the run's workflow cancelled (asking from inside it raises the cancel itself)."""
    try:
        status = await DBOS.get_workflow_status_async(run_id)
    except WorkflowCancelled:
        return True
    return status is not None and status.status == "CANCELLED"


def _in_doubt(tool: str) -> str:
    """Why a headless run stopped on a worker: a call in doubt after its worker died, and nobody to review it."""
    return (
        f"needs review: {tool} was in progress when its worker stopped and may already have taken effect; nothing "
        "was run again, and nobody could be asked (the session is headless). Check what the call did, then send "
        "the session a new message to go on"
    )


def _before(events: list[Event], run_id: str) -> list[Event]:
    """The session's events before ``run_id``'s first (its ``run_queued`` or ``run_started``)."""
    for i, event in enumerate(events):
        if event_run_id(event) == run_id:
            return events[:i]
    return events


@contextlib.asynccontextmanager
async def serving(
    settings: EngineSettings,
    home: Path,
    config: LoomConfig,
    *,
    worker_id: str,
    concurrency: int | None = None,
    store_location: Path | str | None = None,
    on_lost: Callable[[str], None] | None = None,
) -> AsyncIterator[Worker]:
    """A worker over the shared store, taking runs from the queue while the context is open.

    ``store_location`` overrides where the store is (by default the engine's database). ``on_lost`` is told when
    the pool finds this worker taken over (see :class:`~orchestrator.engine.pool.WorkerPool`).
    """
    from orchestrator.runtime.embedded import configured_runtime
    from orchestrator.runtime.host import SessionHost
    from orchestrator.store.checkpoints import CheckpointStore

    location: Any = store_location if store_location is not None else settings.database
    async with contextlib.AsyncExitStack() as stack:
        store = await stack.enter_async_context(CheckpointStore(location))
        log = JournalledEventLog(store)
        # The id first, before DBOS recovers anything into it: a second live worker of the same id is refused.
        pool = await stack.enter_async_context(
            WorkerPool(
                settings.database,
                worker_id,
                heartbeat_s=settings.heartbeat_s,
                takeover_after_s=settings.takeover_after_s,
                recover=_recover,
                version=LOOP_VERSION,
                supervise=False,
                on_lost=on_lost,
                starting=True,
            )
        )
        await stack.enter_async_context(LivePublisher(settings.database, log))  # the face's followers see the text
        runtime = configured_runtime(log, home, config)
        host = await stack.enter_async_context(SessionHost(runtime, limits=config.sessions))
        fence = await psycopg.AsyncConnection.connect(settings.database, autocommit=True)
        stack.push_async_callback(fence.close)
        worker = Worker(host, worker_id, pool, fence)
        serve_runs(worker)
        DBOS(config=dbos_config(settings, executor_id=worker_id))
        try:
            # In this thread, on purpose: DBOS runs the queue's workflows on the loop that launched it. It
            # blocks while it connects and migrates its tables, once, before this worker takes any run.
            DBOS.launch()
            await DBOS.register_queue_async(
                QUEUE,
                worker_concurrency=concurrency or settings.concurrency,
                partition_concurrency=1,
                polling_interval_sec=QUEUE_POLL_S,
            )
            await pool.mark_running()
            pool.start_supervising()
            yield worker
        finally:
            serve_runs(None)
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(_destroy)


async def _recover(executor_ids: Sequence[str]) -> Sequence[str]:
    return await anyio.to_thread.run_sync(recover_executors, executor_ids)


def _destroy() -> None:
    DBOS.destroy(destroy_registry=False)


async def run_worker(
    config: LoomConfig,
    home: Path,
    *,
    worker_id: str,
    concurrency: int | None = None,
    ready: Callable[[str], None] | None = None,
) -> None:
    """Serve runs until cancelled (``loom worker``); ``ready`` is told one line once the worker takes runs.

    Raises:
        ValueError: the config's engine is not the dbos engine.
    """
    settings = config.engine
    if settings is None or not settings.distributed:
        raise ValueError(
            'loom worker needs the dbos engine: set "engine": {"kind": "dbos", "database": "postgresql://…"} '
            "in $LOOM_HOME/config.json"
        )
    async with serving(
        settings, home, config, worker_id=worker_id, concurrency=concurrency, on_lost=_exit_lost
    ) as worker:
        limit = concurrency or settings.concurrency
        if ready is not None:
            ready(
                f"loom worker {worker.worker_id}: joined the pool on {settings.shown_database}, "
                f"up to {limit} runs at a time"
            )
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await _leave(worker)
            raise


async def _leave(worker: Worker) -> None:
    """Stop taking runs and leave the pool; with runs in progress, exit as a crash would, and hand them over.

    Unwinding with runs in flight would cancel their workflows, which DBOS then records as ended for good (or as
    failed, when the runtime under them closes first). Left pending instead, and the pool told that this worker
    left, the next live worker takes them over at once, and their finished steps are not run again.
    """
    if worker.pool is None:
        return
    stop_dequeuing()
    await anyio.sleep(3 * QUEUE_POLL_S)  # a dequeue under way lands, and is counted below
    held = len(worker.held)
    await worker.pool.leave()
    if held:
        _exit(
            0, f"loom worker {worker.worker_id}: stopped with {held} run(s) in progress; another worker takes them over"
        )


def _exit_lost(why: str) -> None:
    _exit(1, f"loom: error: {why}")


def _exit(code: int, line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()
    os._exit(code)
