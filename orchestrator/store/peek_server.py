"""The listings' reads through the checkpoints server, for a store :mod:`orchestrator.store.peek` cannot open itself.

That is a SQLite file of a schema the peek does not know (the server migrates it, or says a newer Loom wrote it),
or the dbos engine's Postgres database. On the dbos engine each run also gets who holds it now, from DBOS's own
record (:func:`live_holders`): after a takeover the run's stored owner still names the worker that started it.
Imported only when needed: it costs the MCP SDK (about a second).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.store.peek import ReadFailed, RunRow, engine_database

if TYPE_CHECKING:
    from orchestrator.store.interface import RunRecord

__all__ = ["held", "live_holders", "server_run", "server_runs"]


async def live_holders(database: str, run_ids: list[str]) -> dict[str, tuple[str, str]]:
    """Who DBOS records as executing each of these runs: ``{run id: (executor id, workflow status)}``.

    DBOS's ``workflow_status`` is the truth on who holds a run now (after a takeover the run's stored ``owner`` still
    names the worker that started it). One query; best effort: when DBOS's tables are not there yet or the query
    fails, the answer is empty and the stored owners stand.
    """
    if not run_ids:
        return {}
    import anyio
    import psycopg

    try:
        with anyio.fail_after(5):
            async with await psycopg.AsyncConnection.connect(database, autocommit=True, connect_timeout=5) as conn:
                found = await conn.execute("SELECT to_regclass('dbos.workflow_status')")
                row = await found.fetchone()
                if row is None or row[0] is None:
                    return {}  # no worker has launched on this database yet
                cur = await conn.execute(
                    "SELECT workflow_uuid, executor_id, status FROM dbos.workflow_status WHERE workflow_uuid = ANY(%s)",
                    (run_ids,),
                )
                return {str(r[0]): (str(r[1] or ""), str(r[2] or "")) for r in await cur.fetchall()}
    except (psycopg.Error, OSError, TimeoutError):
        return {}


def held(row: RunRow, live: dict[str, tuple[str, str]]) -> RunRow:
    """``row`` with DBOS's word on who holds it (from :func:`live_holders`), where DBOS has one."""
    found = live.get(row.id)
    if found is None:
        return row
    executor, status = found
    if status == "ENQUEUED":  # on the queue (new, or re-enqueued by a takeover): no worker holds it
        return row._replace(held_by="")
    # Running, or ended: the executor that ran it last (the one that took it over, if any). A run no worker ever
    # started (cancelled while queued) keeps its stored owner: DBOS's executor then names no worker.
    if executor and (status == "PENDING" or row.worker):
        return row._replace(held_by=executor)
    return row


async def server_runs(home: Path, limit: int) -> list[RunRow]:
    """The most recent runs, newest first, from the server (with their holders on the dbos engine).

    Raises:
        ReadFailed: the server cannot read the store either, or the home's engine setting cannot be used.
    """
    from orchestrator.runtime.embedded import recent_runs
    from orchestrator.store.interface import StoreError

    try:
        rows = [_row(r) for r in await recent_runs(home, limit)]
    except StoreError as exc:
        raise ReadFailed(str(exc)) from exc
    database = engine_database(home)
    if database is None:
        return rows
    live = await live_holders(database, [r.id for r in rows])
    return [held(r, live) for r in rows]


async def server_run(home: Path, run_id: str, whole_session: bool = False) -> tuple[RunRow, list[str]] | None:
    """The run (by id or unique prefix) and its events' JSON (its session's with ``whole_session``), or None.

    Raises:
        ReadFailed: as :func:`server_runs`.
    """
    from orchestrator.runtime.embedded import find_run as server_find
    from orchestrator.store.interface import StoreError

    try:
        stored = await server_find(home, run_id, whole_session=whole_session)
    except StoreError as exc:
        raise ReadFailed(str(exc)) from exc
    if stored is None:
        return None
    row = _row(stored[0])
    database = engine_database(home)
    if database is not None:
        row = held(row, await live_holders(database, [row.id]))
    return row, [e.model_dump_json() for e in stored[1]]


def _row(r: RunRecord) -> RunRow:
    return RunRow(r.id, r.session_id, r.started, r.finished, r.status, r.reason, r.model, r.owner)
