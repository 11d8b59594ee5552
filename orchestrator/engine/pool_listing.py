"""The pool as ``loom workers`` reads it: each worker's row and the state it is in, by the database's clock."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import anyio
import psycopg
from psycopg.rows import dict_row

from orchestrator.engine.pool import QUERY_TIMEOUT_S, START_GRACE_S, PoolError, connect
from orchestrator.engine.settings import mask_url

WorkerState = Literal["starting", "running", "silent", "leaving", "taken over", "stopped"]


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """One worker as ``loom workers`` shows it."""

    id: str
    host: str
    pid: int
    version: str
    started: datetime
    beat_age_s: float
    """Seconds since its last heartbeat, by the database's clock."""
    state: WorkerState
    """``running``; ``silent`` (no beat for longer than its takeover delay, not yet taken over); ``leaving`` (it
    stopped with runs unfinished, which the next live worker takes over); ``taken over`` (another worker recovered
    its runs); ``stopped`` (it stopped cleanly, holding no run)."""
    taken_over_by: str | None
    runs: int | None
    """How many runs DBOS has it driving (pending workflows of its executor id); None before DBOS's tables exist."""


async def list_workers(url: str) -> list[WorkerInfo]:
    """Every worker the pool has seen, most recently started first (empty before any worker joined)."""
    conn = await connect(url)
    try:
        with anyio.fail_after(QUERY_TIMEOUT_S):
            async with conn.cursor(row_factory=dict_row) as cur:
                await cur.execute(
                    "SELECT to_regclass('loom_engine.workers') AS workers, to_regclass('dbos.workflow_status') AS wf"
                )
                found = await cur.fetchone()
                assert found is not None
                if found["workers"] is None:
                    return []
                runs = (
                    "(SELECT count(*) FROM dbos.workflow_status s WHERE s.executor_id = w.id AND s.status = 'PENDING')"
                    if found["wf"] is not None
                    else "NULL::bigint"
                )
                await cur.execute(
                    f"""
                    SELECT id, host, pid, version, started, taken_over_by, state,
                        extract(epoch FROM now() - beat)::float8 AS age, takeover_after_s, {runs} AS runs
                    FROM loom_engine.workers w ORDER BY started DESC, id
                    """
                )
                rows = await cur.fetchall()
    except (psycopg.Error, TimeoutError) as exc:
        raise PoolError(f"cannot read the workers from {mask_url(url)}: {exc}") from None
    finally:
        await conn.close()
    return [_info(row) for row in rows]


def _info(row: dict[str, Any]) -> WorkerInfo:
    state: WorkerState = "running"
    if row["state"] == "stopped":
        state = "stopped"
    elif row["taken_over_by"] is not None:
        state = "taken over"
    elif row["state"] == "left":
        state = "leaving"
    elif row["state"] == "starting":
        state = "starting" if row["age"] <= START_GRACE_S else "silent"
    elif row["age"] > row["takeover_after_s"]:
        state = "silent"
    return WorkerInfo(
        id=row["id"],
        host=row["host"],
        pid=row["pid"],
        version=row["version"],
        started=row["started"],
        beat_age_s=max(0.0, float(row["age"])),
        state=state,
        taken_over_by=row["taken_over_by"],
        runs=None if row["runs"] is None else int(row["runs"]),
    )
