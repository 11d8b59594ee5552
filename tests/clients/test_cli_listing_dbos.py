"""``loom runs``, ``trace`` and ``export`` on the dbos engine: they read the shared Postgres store, not ``loom.db``.

The home's config chooses the engine; the listings then read the database every face and worker writes, and
``loom runs`` says which worker holds each run (DBOS's own record first: after a takeover the stored owner still
names the worker that started it).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from orchestrator.config import LoomConfig
from orchestrator.engine.settings import EngineSettings
from orchestrator.engine.worker import Worker, serving
from orchestrator.events import RunFinished, RunQueued, SessionCreated
from orchestrator.models.scripted import ScriptedModel
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.host import SessionHost
from orchestrator.store import peek, peek_server
from orchestrator.store.checkpoints import CheckpointStore
from tests.clients.cli_support import RUN_TIMEOUT_S, CliResult, clean_env, loom_command, run_loom, write_script


def dbos_home(root: Path, database: str) -> Path:
    """A Loom home whose config.json chooses the dbos engine on ``database``."""
    home = root / "home"
    home.mkdir(exist_ok=True)
    engine = {"kind": "dbos", "database": database, "heartbeatS": 0.5, "takeoverAfterS": 3}
    (home / "config.json").write_text(json.dumps({"engine": engine}), encoding="utf-8")
    return home


def cells(result: CliResult) -> list[dict[str, str]]:
    """``loom runs``' table as rows of {column: cell}, cut at the header's column starts."""
    assert result.returncode == 0, result
    if not result.stdout:
        return []  # no runs yet (said on stderr)
    header, *lines = result.stdout.splitlines()
    names = header.split()
    starts = [header.index(name) for name in names]
    ends = [*starts[1:], None]
    return [{n: line[a:b].strip() for n, a, b in zip(names, starts, ends, strict=True)} for line in lines]


async def loom(*args: str, cwd: Path, home: Path) -> CliResult:
    """``loom ARGS`` in a thread: the worker in this process keeps beating meanwhile."""
    return await anyio.to_thread.run_sync(lambda: run_loom(*args, cwd=cwd, home=home))


@dataclass
class Pool:
    """One worker in this process, and a face over the same database (as ``loom serve`` opens it)."""

    face: SessionHost
    worker: Worker
    home: Path
    work: Path
    database: str


@pytest.fixture
async def pool(fresh_database: str, tmp_path: Path) -> AsyncIterator[Pool]:
    home, work = dbos_home(tmp_path, fresh_database), tmp_path / "work"
    work.mkdir()
    settings = EngineSettings(kind="dbos", database=fresh_database, heartbeat_s=0.5, takeover_after_s=3)
    config = LoomConfig(engine=settings)
    async with serving(settings, home, config, worker_id="w1") as worker:
        async with embedded_runtime(home, config=config) as runtime, SessionHost(runtime) as face:
            yield Pool(face, worker, home, work, fresh_database)


pytestmark = pytest.mark.anyio


async def test_runs_trace_and_export_read_the_shared_store_and_name_the_worker(pool: Pool, tmp_path: Path) -> None:
    script = write_script(
        tmp_path / "s.json",
        [{"text": "Listing.", "tool_calls": [{"name": "fs__list", "arguments": {"path": "."}}]}, {"text": "Done."}],
    )
    session = await pool.face.create_session(pool.work, ScriptedModel.from_file(script), mode="bypass")
    handle = await pool.face.start_run(session.id, "look", 10)
    await pool.face.wait(handle.run_id, 60)
    assert (await pool.face.view(handle.run_id)).status == "completed"

    (row,) = cells(await loom("runs", cwd=pool.work, home=pool.home))
    assert (row["RUN"], row["STATUS"], row["OWNER"]) == (handle.run_id, "completed", "worker w1"), row
    traced = await loom("trace", handle.run_id[:8], cwd=pool.work, home=pool.home)
    assert traced.returncode == 0 and traced.stdout.startswith(f"run {handle.run_id}  session {session.id}"), traced
    assert "status completed" in traced.stdout.splitlines()[0] and "fs__list" in traced.stdout
    exported = (await loom("export", handle.run_id, cwd=pool.work, home=pool.home)).events()
    assert [e.type for e in exported][:2] == ["run_queued", "run_started"] and isinstance(exported[-1], RunFinished)
    assert {getattr(e, "run_id", handle.run_id) for e in exported} == {handle.run_id}
    assert not (pool.home / "loom.db").exists()  # the home's file is neither read nor made

    live = await peek_server.live_holders(pool.database, [handle.run_id, "r_unknown"])
    assert live == {handle.run_id: ("w1", "SUCCESS")}  # DBOS's record, which `loom runs` prefers


async def test_a_run_no_worker_took_yet_shows_queued_before_dbos_has_tables(
    fresh_database: str, tmp_path: Path
) -> None:
    home = dbos_home(tmp_path, fresh_database)
    async with CheckpointStore(fresh_database) as store:  # what a face stores as it accepts a message
        created = SessionCreated(session_id="s_q", cwd=str(tmp_path), model="scripted:x", mode="bypass")
        await store.append(
            [created, RunQueued(session_id="s_q", run_id="r_queued1", text="hi", max_steps=5, owner="worker:")]
        )

    (row,) = cells(await loom("runs", cwd=tmp_path, home=home))
    assert (row["RUN"], row["STATUS"], row["OWNER"]) == ("r_queued1", "queued", "queued"), row
    empty = run_loom("export", "r_nosuch", cwd=tmp_path, home=home)
    assert empty.returncode == 2 and "no run 'r_nosuch' in postgresql://" in empty.stderr, empty


@pytest.mark.parametrize(
    ("owner", "status", "live", "shown"),
    [
        ("worker:w1", "running", None, "worker w1"),  # DBOS's tables not there (or unreadable): the stored owner
        ("worker:w1", "running", ("w2", "PENDING"), "worker w2"),  # taken over: DBOS knows the new holder
        ("worker:w1", "completed", ("w2", "SUCCESS"), "worker w2"),  # and who finished it
        ("worker:w1", "running", ("w1", "ENQUEUED"), "queued"),  # re-enqueued by a takeover, not yet taken
        ("worker:", "queued", ("", "ENQUEUED"), "queued"),
        ("worker:", "cancelled", ("local", "CANCELLED"), "-"),  # cancelled before any worker took it
        ("1234:5678", "completed", None, "-"),  # a run of the embedded engine
    ],
)
def test_the_owner_cell_prefers_dbos_s_record(
    owner: str, status: str, live: tuple[str, str] | None, shown: str
) -> None:
    row = peek.RunRow("r_1", "s_1", 0.0, None, status, "", "scripted:x", owner)
    held = peek_server.held(row, {} if live is None else {"r_1": live})
    assert held.shown_owner == shown


def test_a_bad_engine_setting_or_a_database_down_is_an_error_without_the_password(tmp_path: Path) -> None:
    home = dbos_home(tmp_path, "postgresql://loom:${LOOM_TEST_NO_SUCH_VAR}@127.0.0.1:1/loom")
    unset = run_loom("runs", cwd=tmp_path, home=home)
    assert unset.returncode == 1 and "${LOOM_TEST_NO_SUCH_VAR} is not set" in unset.stderr, unset
    home = dbos_home(tmp_path, "postgresql://loom:s3cret@127.0.0.1:1/loom")
    for args in (["runs"], ["trace", "r_x"], ["export", "r_x"]):
        down = run_loom(*args, cwd=tmp_path, home=home)
        assert down.returncode == 1 and "postgresql://loom:***@127.0.0.1:1/loom" in down.stderr, down
        assert "s3cret" not in down.stderr + down.stdout and "Traceback" not in down.stderr, down


def _start_worker(worker_id: str, home: Path, cwd: Path) -> subprocess.Popen[str]:
    worker = subprocess.Popen(
        [*loom_command(), "worker", "--id", worker_id],
        cwd=cwd, env=clean_env(home), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        encoding="utf-8",
    )  # fmt: skip
    assert worker.stderr is not None
    line = worker.stderr.readline()
    if not line.startswith(f"loom worker {worker_id}: joined the pool"):
        worker.kill()
        raise AssertionError(line + worker.communicate(timeout=10)[1])
    return worker


def test_runs_names_the_worker_that_took_a_killed_workers_run_over(
    fresh_database: str, tmp_path: Path, pytestconfig: pytest.Config
) -> None:
    if not (pytestconfig.getoption("--long") or os.environ.get("LOOM_LONG_TESTS") == "1"):
        pytest.skip("long mode only: pytest --long, or LOOM_LONG_TESTS=1")
    home, work = dbos_home(tmp_path, fresh_database), tmp_path / "work"
    work.mkdir()
    script = write_script(
        tmp_path / "slow.json",
        [
            {"text": "Waiting.", "tool_calls": [{"name": "shell__run", "arguments": {"command": "sleep 60"}}]},
            {"text": "Done."},
        ],
    )
    workers = {w: _start_worker(w, home, work) for w in ("w1", "w2")}
    run = subprocess.Popen(
        [*loom_command(), "run", "--json", "--mode", "bypass", "--model", f"scripted:{script}", "wait"],
        cwd=work, env=clean_env(home), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        encoding="utf-8",
    )  # fmt: skip
    try:
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while True:  # until a worker holds it
            rows = cells(run_loom("runs", cwd=work, home=home))
            if rows and rows[0]["OWNER"].startswith("worker "):
                break
            assert time.monotonic() < deadline, rows
            time.sleep(0.2)
        first = rows[0]["OWNER"].removeprefix("worker ")
        workers[first].kill()
        out, err = run.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        for proc in [run, *workers.values()]:
            if proc.poll() is None:
                proc.kill()
            proc.communicate(timeout=10)
    other = "w2" if first == "w1" else "w1"
    assert f"worker {other} took over run" in out, err
    (row,) = cells(run_loom("runs", cwd=work, home=home))
    assert (row["STATUS"], row["OWNER"]) == ("needs_review", f"worker {other}"), row  # the live holder, from DBOS
    started = [e for e in run_loom("export", row["RUN"], cwd=work, home=home).events() if e.type == "run_started"]
    assert [getattr(e, "owner", "") for e in started] == [f"worker:{first}"]  # what the store alone says
