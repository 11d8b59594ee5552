"""The worker pool: heartbeats in the shared database, and the takeover of a silent worker's runs by one live worker.

Every ``loom worker`` has a row in ``loom_engine.workers`` and refreshes its ``beat`` every ``heartbeat_s``. Each
worker also supervises the others: a worker whose beat is older than ``takeover_after_s`` (and that did not stop
cleanly) is claimed by exactly one live worker, in one ``UPDATE ... WHERE taken_over_by IS NULL``, and that worker
re-enqueues the dead one's pending runs through ``recover`` (in production
:func:`orchestrator.engine.dbos_private.recover_executors`, in a thread). All times are the database server's
(``now()``), so workers on machines whose clocks disagree still agree on who is silent.

A worker that finds its own row taken over (it was silent too long: a pause, a network partition) stops at once
with :class:`WorkerTakenOver` rather than keep driving runs another worker now drives; so does one that could not
beat for ``takeover_after_s``. A worker that stops cleanly is not taken over, unless it stopped with runs
unfinished: the next live worker takes those over at once. A worker id belongs to one live process: starting a
second one is refused; a restarted worker of a dead id takes its id back, and DBOS's launch recovers that id's own
pending runs.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from typing import Any, Self

import anyio
import psycopg
from anyio.abc import TaskGroup
from psycopg.rows import dict_row

from orchestrator.engine.settings import mask_url

log = logging.getLogger(__name__)

Recover = Callable[[Sequence[str]], Awaitable[Sequence[str]]]
"""Re-enqueue the pending runs of these dead workers; returns the ids of the runs made runnable again."""

QUERY_TIMEOUT_S = 10.0
"""Seconds any one query or connection attempt to the shared database may take."""
START_GRACE_S = 120.0
"""A worker still ``starting`` after this long (its launch hung, or it died launching) may be taken over."""
_CLAIM_STALE_S = 30.0
"""A takeover claimed this long ago and not finished is abandoned (its claimer died): it may be claimed again."""

_SCHEMA = """
CREATE SCHEMA IF NOT EXISTS loom_engine;
CREATE TABLE IF NOT EXISTS loom_engine.workers (
    id text PRIMARY KEY,
    host text NOT NULL,
    pid integer NOT NULL,
    version text NOT NULL DEFAULT '',
    started timestamptz NOT NULL,
    beat timestamptz NOT NULL,
    state text NOT NULL,
    heartbeat_s double precision NOT NULL,
    takeover_after_s double precision NOT NULL,
    taken_over_by text,
    taken_over_at timestamptz,
    recovered integer
);
"""


class PoolError(RuntimeError):
    """The pool cannot be joined or read; the message says what happened and what to do."""


class PoolUnreachable(PoolError):
    """The shared database cannot be connected to (a wrong URL, Postgres down)."""


class WorkerIdInUse(PoolError):
    """Another live process is registered under this worker id."""


class WorkerTakenOver(PoolError):
    """This worker was silent long enough for another to take over its runs; it must stop driving them."""


async def connect(url: str) -> psycopg.AsyncConnection[Any]:
    """An autocommit connection to the shared database, with the error in a person's terms if it cannot be had."""
    try:
        with anyio.fail_after(QUERY_TIMEOUT_S):
            return await psycopg.AsyncConnection.connect(url, autocommit=True, connect_timeout=int(QUERY_TIMEOUT_S))
    except (psycopg.Error, TimeoutError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise PoolUnreachable(
            f"cannot reach the engine database {mask_url(url)}: {reason}; check that Postgres is running there "
            'and that "engine.database" in $LOOM_HOME/config.json is right'
        ) from None


class WorkerPool:
    """This process's membership of the pool, as an async context manager owning its heartbeat and supervisor tasks.

    Entering registers ``worker_id`` (refusing an id a live process holds) and starts beating; the supervisor starts
    at once, or when :meth:`start_supervising` is called if ``supervise`` is false (so DBOS can be launched after
    the id is secured and before anything is recovered into it). Leave it after DBOS is destroyed: leaving marks
    the worker ``stopped``, or ``left`` when DBOS still has runs pending under its id (cut short by the stop), which
    the next live worker then takes over without waiting for ``takeover_after_s``. ``version`` is the DBOS
    application version: a worker only takes over workers of its own version, since DBOS recovers only its own
    version's runs.
    """

    def __init__(
        self,
        url: str,
        worker_id: str,
        *,
        heartbeat_s: float,
        takeover_after_s: float,
        recover: Recover,
        version: str = "",
        supervise: bool = True,
        on_lost: Callable[[str], None] | None = None,
        starting: bool = False,
    ) -> None:
        self.url = url
        self.worker_id = worker_id
        self.heartbeat_s = heartbeat_s
        self.takeover_after_s = takeover_after_s
        self.version = version
        self._recover = recover
        self._on_lost = on_lost
        self._starting = starting
        """Register as ``starting`` (see :meth:`mark_running`) rather than ``running``."""
        """Told why, before the pool raises that this worker lost its place (a ``loom worker`` exits there and
        then: unwinding would let its runs' workflows record an end while another worker drives them)."""
        self._supervise = anyio.Event()
        if supervise:
            self._supervise.set()
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._group: TaskGroup | None = None
        self._last_beat = 0.0

    def start_supervising(self) -> None:
        """Begin taking over silent workers (when the pool was made with ``supervise=False``)."""
        self._supervise.set()

    async def __aenter__(self) -> Self:
        self._conn = await connect(self.url)
        try:
            await self._create_table()
            await self._register()
        except BaseException:
            await self._close()
            raise
        self._last_beat = time.monotonic()
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        self._group.start_soon(self._beat_loop)
        self._group.start_soon(self._supervise_loop)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        assert self._group is not None
        self._group.cancel_scope.cancel()
        try:
            await self._group.__aexit__(exc_type, exc, tb)
        except BaseExceptionGroup as group:
            # The supervisor's own failure (taken over, no heartbeat) is the news: raise it as itself.
            mine = group.subgroup(PoolError)
            if (
                mine is not None
                and len(mine.exceptions) == 1
                and not isinstance(mine.exceptions[0], BaseExceptionGroup)
            ):
                raise mine.exceptions[0] from None
            raise
        finally:
            with anyio.CancelScope(shield=True):
                await self._mark_stopped()
                await self._close()
        return None

    async def _create_table(self) -> None:
        found = await self._fetchone("SELECT to_regclass('loom_engine.workers') AS t")
        if found is not None and found["t"] is not None:
            return
        conn = await self._connection()
        try:
            async with conn.transaction():
                # Two workers starting on an empty database would otherwise race on CREATE ... IF NOT EXISTS.
                await conn.execute("SELECT pg_advisory_xact_lock(hashtext('loom_engine.workers'))")
                await conn.execute(_SCHEMA)
        except psycopg.Error as exc:
            raise PoolError(f"cannot create the table loom_engine.workers in {mask_url(self.url)}: {exc}") from None

    async def _register(self) -> None:
        # A takeover of this id in progress must finish first: the claimer re-enqueues the id's PENDING runs, and
        # once this process's DBOS has dequeued them again they would be PENDING under this id too, and run twice.
        deadline = time.monotonic() + _CLAIM_STALE_S + self.heartbeat_s
        while True:
            row = await self._fetchone(
                """
                INSERT INTO loom_engine.workers AS w
                    (id, host, pid, version, started, beat, state, heartbeat_s, takeover_after_s)
                VALUES (%(id)s, %(host)s, %(pid)s, %(version)s, now(), now(), %(state)s, %(beat)s, %(takeover)s)
                ON CONFLICT (id) DO UPDATE SET
                    host = EXCLUDED.host, pid = EXCLUDED.pid, version = EXCLUDED.version, started = now(),
                    beat = now(), state = EXCLUDED.state, heartbeat_s = EXCLUDED.heartbeat_s,
                    takeover_after_s = EXCLUDED.takeover_after_s, taken_over_by = NULL, taken_over_at = NULL,
                    recovered = NULL
                WHERE (w.state NOT IN ('running', 'starting') OR w.taken_over_by IS NOT NULL
                        OR w.beat < now() - make_interval(secs => w.takeover_after_s))
                    AND NOT (w.taken_over_by IS NOT NULL AND w.recovered IS NULL
                        AND w.taken_over_at > now() - make_interval(secs => %(stale)s))
                RETURNING id
                """,
                {
                    "id": self.worker_id,
                    "host": socket.gethostname(),
                    "pid": os.getpid(),
                    "version": self.version,
                    "beat": self.heartbeat_s,
                    "takeover": self.takeover_after_s,
                    "stale": _CLAIM_STALE_S,
                    "state": "starting" if self._starting else "running",
                },
            )
            if row is not None:
                return
            holder = await self._fetchone(
                "SELECT host, pid, taken_over_by, recovered FROM loom_engine.workers WHERE id = %(id)s",
                {"id": self.worker_id},
            )
            if holder is None or holder["taken_over_by"] is None or holder["recovered"] is not None:
                break
            if time.monotonic() > deadline:
                raise WorkerIdInUse(
                    f"worker {holder['taken_over_by']} is still taking over the runs of {self.worker_id}; try again"
                )
            log.warning(
                "worker %s: waiting for %s to finish taking over its runs", self.worker_id, holder["taken_over_by"]
            )
            await anyio.sleep(min(self.heartbeat_s, 1.0))
        where = f"on {holder['host']} (pid {holder['pid']})" if holder else "elsewhere"
        raise WorkerIdInUse(f"a worker named {self.worker_id} is already running {where}; pick another --id")

    async def _beat_loop(self) -> None:
        while True:
            await anyio.sleep(self.heartbeat_s)
            try:
                row = await self._fetchone(
                    """
                    UPDATE loom_engine.workers SET beat = now()
                    WHERE id = %(id)s AND state IN ('running', 'starting') AND taken_over_by IS NULL
                    RETURNING id
                    """,
                    {"id": self.worker_id},
                )
            except PoolError as exc:
                silent = time.monotonic() - self._last_beat
                if silent >= self.takeover_after_s:
                    raise self._lost(
                        PoolError(
                            f"worker {self.worker_id} could not record a heartbeat for {silent:.0f} s ({exc}); it "
                            "stops so that the worker taking over its runs is the only one driving them"
                        )
                    ) from None
                log.warning("worker %s: heartbeat failed, retrying: %s", self.worker_id, exc)
                continue
            if row is None:
                taker = await self._fetchone(
                    "SELECT taken_over_by FROM loom_engine.workers WHERE id = %(id)s", {"id": self.worker_id}
                )
                by = taker["taken_over_by"] if taker and taker["taken_over_by"] else "another worker"
                raise self._lost(
                    WorkerTakenOver(
                        f"worker {self.worker_id} was silent for longer than {self.takeover_after_s:g} s and {by} "
                        "took over its runs; it stops so that no run is driven twice "
                        "(start it again to rejoin the pool)"
                    )
                )
            self._last_beat = time.monotonic()

    def _lost(self, error: PoolError) -> PoolError:
        if self._on_lost is not None:
            self._on_lost(str(error))
        return error

    async def _supervise_loop(self) -> None:
        await self._supervise.wait()
        while True:
            try:
                await self.take_over_silent()
            except PoolError as exc:
                log.warning("worker %s: could not check the other workers: %s", self.worker_id, exc)
            await anyio.sleep(self.heartbeat_s)

    async def take_over_silent(self) -> list[str]:
        """Claim the silent workers of this version and recover their runs; returns the ids claimed.

        A silent worker is claimed if no one has, or if its claimer gave up (claimed 30 s ago, nothing recovered).
        The claim is one ``UPDATE`` per row under Postgres's row lock, so of several supervisors exactly one gets a
        given worker. A recovery that fails releases the claim, so a later check (by any worker) tries again.

        The claimer must itself be live by the database's clock, in the same statement: two workers stalled
        together (a loaded machine) would otherwise each count the other silent and claim it, and both stop,
        leaving no one to drive the runs. A beat is stamped with the time its statement started, so a worker whose
        beat committed late can hold a fresh local clock and a stale row; the row is what others judge it by.
        """
        if time.monotonic() - self._last_beat >= self.takeover_after_s:
            return []  # a worker that may itself be counted silent takes nothing over
        rows = await self._query(
            """
            UPDATE loom_engine.workers SET taken_over_by = %(me)s, taken_over_at = now()
            WHERE id <> %(me)s AND version = %(version)s
                AND EXISTS (SELECT 1 FROM loom_engine.workers me WHERE me.id = %(me)s AND me.taken_over_by IS NULL
                    AND me.state IN ('running', 'starting') AND me.beat >= now() - make_interval(secs => %(after)s))
                AND ((state = 'running' AND beat < now() - make_interval(secs => %(after)s)) OR state = 'left'
                    OR (state = 'starting' AND beat < now() - make_interval(secs => %(grace)s)))
                AND (taken_over_by IS NULL
                    OR (recovered IS NULL AND taken_over_at < now() - make_interval(secs => %(stale)s)))
            RETURNING id
            """,
            {
                "me": self.worker_id,
                "version": self.version,
                "after": self.takeover_after_s,
                "stale": _CLAIM_STALE_S,
                "grace": START_GRACE_S,
            },
        )
        claimed = sorted(str(r["id"]) for r in rows)
        for dead in claimed:
            await self._recover_one(dead)
        for stranded in await self._stranded():
            log.warning(
                "worker %s: runs are still pending under taken-over worker %s; recovering them",
                self.worker_id,
                stranded,
            )
            await self._recover([stranded])
        return claimed

    async def _stranded(self) -> list[str]:
        """Taken-over workers that no longer beat and still have runs pending under their id.

        A worker counted silent may still be alive for a moment (slow, not dead) and take a run back off the queue
        before it notices it was taken over and exits: that run would wait for the id to come back. Recovering
        it again is safe once the id has stopped beating, since a re-enqueue only matches a run still pending under
        that id, and the dequeue that follows admits one worker.
        """
        found = await self._fetchone("SELECT to_regclass('dbos.workflow_status') AS t")
        if found is None or found["t"] is None:
            return []
        rows = await self._query(
            """
            SELECT w.id FROM loom_engine.workers w
            WHERE w.id <> %(me)s AND w.version = %(version)s AND w.taken_over_by IS NOT NULL
                AND w.recovered IS NOT NULL AND w.beat < now() - make_interval(secs => %(after)s)
                AND EXISTS (SELECT 1 FROM dbos.workflow_status s WHERE s.executor_id = w.id
                    AND s.status = 'PENDING' AND s.application_version = %(version)s)
            """,
            {"me": self.worker_id, "version": self.version, "after": self.takeover_after_s},
        )
        return sorted(str(r["id"]) for r in rows)

    async def mark_running(self) -> None:
        """This worker finished starting (DBOS launched): from now on a silence of ``takeover_after_s`` counts.

        Until then the row says ``starting``, which others take over only after a long grace: launching DBOS
        blocks this process for a while, and a worker must not be taken over for the time it takes to start.
        """
        await self._execute(
            "UPDATE loom_engine.workers SET state = 'running', beat = now() "
            "WHERE id = %(id)s AND pid = %(pid)s AND taken_over_by IS NULL",
            {"id": self.worker_id, "pid": os.getpid()},
        )
        self._last_beat = time.monotonic()

    async def _recover_one(self, dead: str) -> None:
        try:
            recovered = await self._recover([dead])
        except Exception:
            log.exception(
                "worker %s: recovering the runs of silent worker %s failed; releasing it", self.worker_id, dead
            )
            await self._execute(
                "UPDATE loom_engine.workers SET taken_over_by = NULL, taken_over_at = NULL "
                "WHERE id = %(dead)s AND taken_over_by = %(me)s",
                {"dead": dead, "me": self.worker_id},
            )
            return
        log.warning("worker %s took over silent worker %s: %d run(s) re-enqueued", self.worker_id, dead, len(recovered))
        await self._execute(
            "UPDATE loom_engine.workers SET recovered = %(n)s WHERE id = %(dead)s AND taken_over_by = %(me)s",
            {"n": len(recovered), "dead": dead, "me": self.worker_id},
        )

    async def leave(self) -> None:
        """Record this worker's stop at once (``left`` when runs are pending under it) and close the connection.

        For a worker that exits without unwinding (``loom worker`` stopped mid-run): its runs stay pending in DBOS
        and the next live worker takes them over without waiting for the heartbeat to go stale.
        """
        with anyio.CancelScope(shield=True):
            await self._mark_stopped()
            await self._close()

    async def _mark_stopped(self) -> None:
        # Called after DBOS is destroyed in this process: its runs still PENDING under this id were cut short, and
        # are left to the next worker to look (state 'left'), rather than wait for this id to come back.
        try:
            held = await self._held_runs()
            await self._execute(
                "UPDATE loom_engine.workers SET state = %(state)s, beat = now() "
                "WHERE id = %(id)s AND pid = %(pid)s AND taken_over_by IS NULL",
                {"id": self.worker_id, "pid": os.getpid(), "state": "left" if held else "stopped"},
            )
        except PoolError as exc:
            log.warning("worker %s: could not record its clean stop (it will be taken over): %s", self.worker_id, exc)
            return
        if held:
            log.warning(
                "worker %s left the pool with %d run(s) unfinished; another worker takes them over",
                self.worker_id,
                held,
            )

    async def _held_runs(self) -> int:
        """How many runs DBOS has pending under this worker's id and version (0 before DBOS's tables exist)."""
        found = await self._fetchone("SELECT to_regclass('dbos.workflow_status') AS t")
        if found is None or found["t"] is None:
            return 0
        # DBOS's system table (schema ``dbos``); tests/orchestrator/engine/test_dbos_private.py reads the same columns.
        row = await self._fetchone(
            "SELECT count(*) AS n FROM dbos.workflow_status "
            "WHERE executor_id = %(id)s AND status = 'PENDING' AND application_version = %(version)s",
            {"id": self.worker_id, "version": self.version},
        )
        return int(row["n"]) if row else 0

    async def _connection(self) -> psycopg.AsyncConnection[Any]:
        if self._conn is None or self._conn.closed or self._conn.broken:
            await self._close()
            self._conn = await connect(self.url)
        return self._conn

    async def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    async def _execute(self, sql: str, params: dict[str, object] | None = None) -> None:
        await self._query(sql, params)

    async def _fetchone(self, sql: str, params: dict[str, object] | None = None) -> dict[str, Any] | None:
        rows = await self._query(sql, params)
        return rows[0] if rows else None

    async def _query(self, sql: str, params: dict[str, object] | None = None) -> list[dict[str, Any]]:
        try:
            conn = await self._connection()
            with anyio.fail_after(QUERY_TIMEOUT_S):
                async with conn.cursor(row_factory=dict_row) as cur:
                    await cur.execute(sql, params)
                    return await cur.fetchall() if cur.description else []
        except (psycopg.Error, TimeoutError) as exc:
            await self._close()
            raise PoolError(f"the engine database {mask_url(self.url)} failed: {exc}") from None
