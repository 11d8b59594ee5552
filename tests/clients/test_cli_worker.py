"""``loom worker`` and ``loom workers`` as a person runs them: real processes, a real Postgres, real signals."""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest

from orchestrator.engine.pool import WorkerPool
from tests.clients.cli_support import clean_env, loom_command, run_loom
from tests.orchestrator.engine.test_pool import BEAT, TAKEOVER, start_beating

NEEDS_DBOS = (
    'needs the dbos engine: set "engine": {"kind": "dbos", "database": "postgresql://…"} in $LOOM_HOME/config.json'
)


def home_with(tmp_path: Path, engine: object | None) -> Path:
    """A Loom home whose config.json sets ``engine`` (or nothing)."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.json").write_text(json.dumps({} if engine is None else {"engine": engine}), encoding="utf-8")
    return home


def table(text: str) -> list[dict[str, str]]:
    """``loom workers``' table as rows of {column: cell}, cut at the header's column starts."""
    header, *lines = text.splitlines()
    names = ["ID", "HOST", "PID", "STATE", "LAST BEAT", "TAKEN OVER BY", "RUNS"]
    starts = [header.index(name) for name in names]
    ends = [*starts[1:], None]
    return [{n: line[a:b].strip() for n, a, b in zip(names, starts, ends, strict=True)} for line in lines]


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


def test_a_worker_joins_shows_in_the_list_and_leaves_cleanly_on_sigterm(fresh_database: str, tmp_path: Path) -> None:
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
        listed = run_loom("workers", "--json", cwd=tmp_path, home=home)
        [row] = json.loads(listed.stdout)["workers"]
        assert (row["id"], row["state"], row["pid"], row["runs"]) == ("w1", "running", worker.pid, 0)
        [shown] = table(run_loom("workers", cwd=tmp_path, home=home).stdout)
        assert [shown[k] for k in ("ID", "HOST", "PID", "STATE", "RUNS")] == [
            "w1",
            row["host"],
            str(worker.pid),
            "running",
            "0",
        ]
        assert shown["LAST BEAT"].endswith("s ago")

        worker.send_signal(signal.SIGTERM)
        _, rest = worker.communicate(timeout=30)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.communicate(timeout=10)
    assert worker.returncode == 0, rest
    [row] = json.loads(run_loom("workers", "--json", cwd=tmp_path, home=home).stdout)["workers"]
    assert (row["id"], row["state"], row["taken_over_by"]) == ("w1", "stopped", None)


@pytest.mark.anyio
async def test_workers_shows_who_took_over_a_killed_worker(fresh_database: str, tmp_path: Path) -> None:
    home = home_with(tmp_path, {"kind": "dbos", "database": fresh_database})
    recovered = anyio.Event()

    async def recover(ids: Sequence[str]) -> list[str]:
        recovered.set()
        return []

    started: list[subprocess.Popen[str]] = []
    try:
        dead = start_beating(fresh_database, "w-gone", started)
        async with WorkerPool(fresh_database, "w-live", heartbeat_s=BEAT, takeover_after_s=TAKEOVER, recover=recover):
            dead.kill()
            with anyio.fail_after(10):
                await recovered.wait()
            listed = await anyio.to_thread.run_sync(lambda: run_loom("workers", cwd=tmp_path, home=home))
    finally:
        for proc in started:
            proc.kill()
            proc.communicate(timeout=10)
    rows = {row["ID"]: row for row in table(listed.stdout)}
    assert (rows["w-gone"]["STATE"], rows["w-gone"]["TAKEN OVER BY"]) == ("taken over", "w-live"), listed
    assert (rows["w-live"]["STATE"], rows["w-live"]["TAKEN OVER BY"]) == ("running", "-"), listed
    assert rows["w-gone"]["RUNS"] == "-"  # DBOS never ran on this database: no run count to show
