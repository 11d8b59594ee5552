"""Smoke tests of benchmarks/store.py and benchmarks/resume.py in a tiny mode.

The store's counts are exact, so issue 5's hot-path target (one store round trip per model call and
per tool call, one SQLite transaction per step) is asserted here; the times are not.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest

from benchmarks import resume, store

pytestmark = pytest.mark.anyio


def test_wal_commits_counts_write_transactions_not_statements(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    wal = store.WalCommits(tmp_path / "t.db-wal")
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA wal_autocheckpoint=0")
        conn.execute("CREATE TABLE t (x TEXT)")
        assert wal.poll() == 1
        conn.execute("INSERT INTO t VALUES ('a')")
        conn.execute("INSERT INTO t VALUES (?)", ("b" * 20_000,))  # several pages, one commit
        assert wal.poll() == 2
        conn.execute("BEGIN")
        for i in range(5):
            conn.execute("INSERT INTO t VALUES (?)", (str(i),))
        conn.execute("COMMIT")
        conn.execute("SELECT count(*) FROM t").fetchone()  # a read writes nothing
        assert wal.poll() == 1
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("INSERT INTO t VALUES ('after a restart of the WAL')")
        assert wal.poll() == 1
    assert wal.commits == 5


async def test_the_hot_path_costs_one_round_trip_and_one_transaction_per_step(tmp_path: Path) -> None:
    figures = await store.measure(tmp_path, 1, 3)
    assert [f.key for f in figures] == [
        "store_trips_per_model_call",
        "store_trips_per_tool_call",
        "store_transactions_per_step",
    ]
    for figure in figures:
        assert figure.ratio == 1.0, figure
        assert figure.status == "PASS", figure


def test_the_resume_benchmark_resumes_a_killed_run(tmp_path: Path) -> None:
    figure = resume.measure(tmp_path, 3, 1)
    assert figure.key == "resume"
    assert figure.data["steps"] == 3
    (one,) = figure.data["resumes"]
    assert one["total"] > 0 and one["events"] > 3 * 3
