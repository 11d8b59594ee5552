"""The checkpoints database folds its WAL back at a run's end once a few hundred rows have piled up, not every run."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from servers.checkpoints import _db
from servers.checkpoints._db import Database

pytestmark = pytest.mark.anyio


def wal_frames(path: Path) -> int:
    """Frames in the WAL not yet copied back, as another connection sees them (a PASSIVE checkpoint's count)."""
    with sqlite3.connect(path) as other:
        busy, logged, folded = other.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    return int(logged) - int(folded) if not busy else -1


async def one_run(db: Database, run_id: str, notes: int) -> None:
    now = time.time()
    await db.append([{"session_id": "s", "type": "run_started", "run_id": run_id, "ts": now, "model": "m"}])
    for i in range(notes):
        await db.append([{"session_id": "s", "type": "notice", "run_id": run_id, "ts": now, "text": f"{i}"}])
    finished = {"session_id": "s", "type": "run_finished", "run_id": run_id, "ts": now, "status": "completed"}
    await db.append([{**finished, "reason": "end_turn", "final_text": "", "steps": 1}])


async def test_short_runs_leave_the_wal_until_enough_rows_have_piled_up(tmp_path: Path) -> None:
    db = await Database.open(tmp_path / "loom.db")
    try:
        await db.append([{"session_id": "s", "type": "session_created", "ts": time.time(), "cwd": "/", "model": "m"}])
        await one_run(db, "r_1", 3)
        assert db._unfolded == 6  # a one-turn run's end no longer pays for a checkpoint
        await one_run(db, "r_2", _db._CHECKPOINT_AFTER_ROWS)
        assert db._unfolded == 0  # a run's end past the threshold folded the WAL back
        await one_run(db, "r_3", 1)
        assert db._unfolded == 3
        assert len(await db.read_events("s")) == 1 + 5 + _db._CHECKPOINT_AFTER_ROWS + 2 + 3
    finally:
        await db.close()
    assert wal_frames(tmp_path / "loom.db") >= 0


async def test_a_run_end_past_the_threshold_is_stored_even_while_a_read_holds_the_checkpoint_off(
    tmp_path: Path,
) -> None:
    db = await Database.open(tmp_path / "loom.db")
    try:
        await db.append([{"session_id": "s", "type": "session_created", "ts": time.time(), "cwd": "/", "model": "m"}])
        async with db._conn.execute("SELECT body FROM events WHERE session_id='s'") as reading:
            await reading.fetchone()  # a read in progress on the connection: the checkpoint cannot fold it all
            await one_run(db, "r_1", _db._CHECKPOINT_AFTER_ROWS)
        assert len(await db.read_events("s")) == 1 + 1 + _db._CHECKPOINT_AFTER_ROWS + 1
        await one_run(db, "r_2", _db._CHECKPOINT_AFTER_ROWS)
        assert db._unfolded == 0  # with the read over, a run's end folds everything back
    finally:
        await db.close()
