"""Found by the crash test's long mode: a run ended ``failed`` with "database table is locked".

``Database.append`` follows a batch holding ``run_finished`` with ``PRAGMA wal_checkpoint(PASSIVE)`` on
the same connection. A concurrent read (``_fetch``: ``execute``, then ``fetchall``, two hops on
aiosqlite's thread, so other work runs between them) leaves a statement open; the checkpoint then
fails with SQLITE_LOCKED, and ``append`` reports "could not write" ("nothing of the batch was
stored") although the batch was committed. The runtime then fails the run (StoreError) and never
publishes events that are in the store. A long-polling ``read_events`` client is enough to trigger it.
The checkpoint is housekeeping, so it now gives way: a batch that committed is reported as stored.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from servers.checkpoints._db import Database

pytestmark = pytest.mark.anyio


async def test_a_read_in_progress_does_not_fail_an_append_that_ends_a_run(tmp_path: Path) -> None:
    db = await Database.open(tmp_path / "loom.db")
    try:
        now = time.time()
        await db.append(
            [
                {"session_id": "s", "type": "session_created", "ts": now, "cwd": "/", "model": "m"},
                {"session_id": "s", "type": "run_started", "run_id": "r", "ts": now, "model": "m"},
            ]
        )
        # Where a concurrent read_events stands between its execute and its fetchall.
        async with db._conn.execute("SELECT body FROM events WHERE session_id='s'") as reading:
            await reading.fetchone()
            finished = {"session_id": "s", "type": "run_finished", "run_id": "r", "ts": now, "status": "completed"}
            seqs = await db.append([{**finished, "reason": "end_turn", "final_text": "", "steps": 1}])
        assert seqs == [3]
        assert len(await db.read_events("s")) == 3
    finally:
        await db.close()
