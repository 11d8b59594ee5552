"""``loom worker`` and ``loom workers`` as a person runs them: real processes, a real Postgres, real signals."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import anyio
import pytest

from orchestrator.engine.pool import WorkerPool
from tests.clients.cli_support import clean_env, loom_command, run_loom

NEEDS_DBOS = (
    'needs the dbos engine: set "engine": {"kind": "dbos", "database": "postgresql://…"} in $LOOM_HOME/config.json'
)


def home_with(tmp_path: Path, engine: object | None) -> Path:
    """A Loom home whose config.json sets ``engine`` (or nothing)."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.json").write_text(json.dumps({} if engine is None else {"engine": engine}), encoding="utf-8")
    return home


@pytest.mark.parametrize("command", ["worker", "workers"])
def test_the_embedded_engine_is_told_how_to_set_the_dbos_one(tmp_path: Path, command: str) -> None:
    done = run_loom(command, cwd=tmp_path, home=home_with(tmp_path, None))
    assert (done.returncode, done.stderr) == (2, f"loom: error: loom {command} {NEEDS_DBOS}\n"), done


def test_a_bad_id_and_an_unreachable_database_are_errors_without_the_password(tmp_path: Path) -> None:
    home = home_with(tmp_path, {"kind": "dbos", "database": "postgresql://loom:s3cret@127.0.0.1:1/loom"})
    bad = run_loom("worker", "--id", "two words", cwd=tmp_path, home=home)
    assert bad.returncode == 2 and "--id 'two words' is not a worker name" in bad.stderr, bad
    listed = run_loom("workers", cwd=tmp_path, home=home)
    assert listed.returncode == 2, listed
    assert listed.stderr.startswith("loom: error: cannot reach the engine database postgresql://loom:***@127.0.0.1:1/")
    assert "s3cret" not in listed.stderr + listed.stdout


def test_a_worker_joins_and_leaves_cleanly_on_sigterm(fresh_database: str, tmp_path: Path) -> None:
    home = home_with(tmp_path, {"kind": "dbos", "database": fresh_database, "concurrency": 3})
    worker = subprocess.Popen(
        [*loom_command(), "worker", "--id", "w1"],
        cwd=tmp_path,
        env=clean_env(home),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        encoding="utf-8",
    )
    try:
        assert worker.stderr is not None
        joined = worker.stderr.readline()
        assert joined == f"loom worker w1: joined the pool on {fresh_database}, up to 3 runs at a time\n"
        worker.send_signal(signal.SIGTERM)
        _, rest = worker.communicate(timeout=30)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.communicate(timeout=10)
    assert worker.returncode == 0, rest


@pytest.mark.anyio
async def test_workers_lists_a_taken_over_worker_with_who_took_it(fresh_database: str, tmp_path: Path) -> None:
    home = home_with(tmp_path, {"kind": "dbos", "database": fresh_database})

    async def recover(ids: object) -> list[str]:
        return []

    kwargs = {"heartbeat_s": 0.2, "takeover_after_s": 0.5, "recover": recover}
    async with WorkerPool(fresh_database, "w-live", **kwargs):  # type: ignore[arg-type]
        async with WorkerPool(fresh_database, "w-gone", **kwargs):  # type: ignore[arg-type]
            pass
        listed = await anyio.to_thread.run_sync(lambda: run_loom("workers", cwd=tmp_path, home=home))
    lines = [line.split() for line in listed.stdout.splitlines()[1:]]
    assert sorted((cells[0], cells[3]) for cells in lines) == [("w-gone", "stopped"), ("w-live", "running")]
