"""The DBOS engine (issue 18): a step's cost against the embedded engine, throughput on two workers, takeover time.

The group starts its own throwaway PostgreSQL cluster (the test suite's, :mod:`tests.pg`: ``initdb`` into a temporary
directory, a free port on 127.0.0.1, trust authentication on 127.0.0.1 only, durability off; as root it belongs to
Debian's ``postgres`` user), one fresh database per figure, and stops it on every way out (a watchdog stops it if
this process is killed). Without the Postgres binaries it prints that it is skipped and why.

Every run is scripted (``scripted:FILE`` with ``by_history``: a worker in any process answers the same), in bypass
mode, and reads a tiny file with ``fs__read`` at each step: a cheap read-only tool, so what is measured is the
engine. Times come from what a user sees: the events stored in the shared store (their ``ts``, stamped by the
process that made them) and the moments this process first reads them.

* per step (:func:`measure_step`): the same run on the embedded engine (SQLite) and on the DBOS engine (one worker in
  this process, the face beside it), alternately; a step is the time between two consecutive ``tool_call_finished``
  events of a run.
* throughput and takeover: :mod:`benchmarks.engine_pool` (``loom worker`` processes).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from benchmarks._report import Figure, fmt_time, median, paired_ratio
from orchestrator.config import LoomConfig
from orchestrator.engine.settings import EngineSettings
from orchestrator.events import Event, RunFinished, ToolCallFinished
from orchestrator.models.scripted import ScriptedModel
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.host import SessionHost

STEP_TARGET = 3.0
STEP_KEY, STEP_TITLE = "engine_step", "DBOS engine step vs embedded"
SKIPPED = "skipped: Postgres is not installed (apt-get install postgresql)"
RUN_TIMEOUT_S = 60.0
TINY = "tiny.txt"


class NoPostgres(Exception):
    """No cluster can be started here; the message says why, for the ``skipped:`` line."""


@dataclass(frozen=True)
class PgServer:
    """A running private cluster: its maintenance database's URL and its data directory."""

    url: str
    data: Path

    def cpu_seconds(self) -> float:
        """CPU time the cluster has used so far: the postmaster and its children, live and exited (Linux ``/proc``)."""
        pid = int((self.data / "postmaster.pid").read_text(encoding="utf-8").split()[0])
        total = 0.0
        tick = os.sysconf("SC_CLK_TCK")
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                fields = (entry / "stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(entry.name) == pid:  # its own time and that of the backends it has reaped
                total += sum(int(f) for f in fields[11:15]) / tick
            elif int(fields[1]) == pid:
                total += (int(fields[11]) + int(fields[12])) / tick
        return total


@contextlib.contextmanager
def postgres_server() -> Iterator[PgServer]:
    """A private cluster, for as long as the context is open.

    Raises:
        NoPostgres: the binaries are not installed (or, as root, there is no ``postgres`` user to own the cluster).
    """
    import pytest

    from tests.pg import _Cluster, postgres_bin_dir

    bin_dir = postgres_bin_dir()
    if bin_dir is None:
        raise NoPostgres(SKIPPED)
    try:
        cluster = _Cluster(bin_dir)
    except pytest.skip.Exception as exc:  # root without Debian's `postgres` user
        raise NoPostgres(f"skipped: {exc.msg}") from None
    try:
        cluster.start()
        yield PgServer(cluster.url, cluster.data)
    finally:
        cluster.stop()


@contextlib.contextmanager
def database(server: PgServer) -> Iterator[str]:
    """A fresh database on ``server`` (dropped after): one per figure, so none sees another's runs."""
    from tests.pg import created_database

    with created_database(server.url) as url:
        yield url


def read_script(path: Path, steps: int, *, delay_s: float = 0.0) -> ScriptedModel:
    """A ``by_history`` script of ``steps`` turns that each read :data:`TINY`, then a final answer; written to ``path``.

    Each read asks for a different last line past the file's end (same text back, different calls), so loop
    detection takes the run for progress, as in :mod:`benchmarks.loop`. ``delay_s``: each turn thinks this long.
    """
    turns: list[dict[str, Any]] = [
        {
            "text": f"Step {i}: reading.",
            "tool_calls": [{"name": "fs__read", "arguments": {"path": TINY, "end_line": 1_000_000 + i}}],
            "delay_s": delay_s,
        }
        for i in range(steps)
    ]
    turns.append({"text": "Done."})
    path.write_text(json.dumps({"by_history": True, "turns": turns}), encoding="utf-8")
    return ScriptedModel.from_file(path)


def private_dir(path: Path) -> Path:
    """``path`` made (mode 0700, as Loom wants its homes) if missing; returned."""
    path.mkdir(parents=True, mode=0o700, exist_ok=True)
    return path


def work_dir(root: Path) -> Path:
    """The sessions' working directory, with the tiny file every step reads."""
    cwd = root / "work"
    cwd.mkdir(parents=True, exist_ok=True)
    (cwd / TINY).write_text("hello\n", encoding="utf-8")
    return cwd


def check_finished(events: list[Event], run_id: str, steps: int) -> RunFinished:
    """The run's end, which must be ``completed`` after ``steps`` tool steps that all succeeded."""
    ended = [e for e in events if isinstance(e, RunFinished) and e.run_id == run_id]
    calls = [e for e in events if isinstance(e, ToolCallFinished) and e.run_id == run_id]
    if len(ended) != 1 or ended[0].status != "completed":
        raise AssertionError(f"run {run_id} ended {[e.status for e in ended]}: {[e.reason for e in ended]}")
    failed = [c for c in calls if c.is_error]
    if len(calls) != steps or failed:
        raise AssertionError(f"run {run_id}: {len(calls)} calls of {steps}, {len(failed)} failed")
    return ended[0]


def step_times(events: list[Event], run_id: str) -> list[float]:
    """Seconds between consecutive ``tool_call_finished`` events of ``run_id`` (one loop step each)."""
    stamps = [e.ts for e in events if isinstance(e, ToolCallFinished) and e.run_id == run_id]
    return [b - a for a, b in pairwise(stamps)]


async def settled(host: SessionHost, run_ids: list[str]) -> None:
    """Wait until DBOS has recorded the end of each run's workflow (its worker may still be returning from it)."""
    if host.remote is None:
        return
    with anyio.fail_after(RUN_TIMEOUT_S):
        for run_id in run_ids:
            while True:
                if not await host.remote.holder(run_id):
                    break
                await anyio.sleep(0.01)


async def one_run(host: SessionHost, cwd: Path, model: ScriptedModel, steps: int) -> tuple[str, list[float]]:
    """A fresh session on ``host`` whose run makes ``steps`` steps; its id and step times, from the stored events."""
    session = await host.create_session(cwd, model, mode="bypass", headless=True)
    handle = await host.start_run(session.id, "Benchmark the engine.", steps + 1)
    await host.wait(handle.run_id, RUN_TIMEOUT_S)
    events = await host.runtime.log.store.read_events(session.id)
    check_finished(events, handle.run_id, steps)
    await settled(host, [handle.run_id])
    return handle.run_id, step_times(events, handle.run_id)


_THREAD_GROUPS = (
    ("MainThread", "event loop (worker and face)"),
    ("dbos-executor", "DBOS's step threads"),
    ("queue", "DBOS's queue pollers"),
)


def thread_cpu() -> dict[str, float]:
    """CPU seconds this process's threads have used, by group (Linux ``/proc``; empty elsewhere)."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    found: dict[str, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    tasks = Path("/proc/self/task")
    if not tasks.is_dir():
        return found
    for task in tasks.iterdir():
        try:
            fields = (task / "stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()
        except OSError:
            continue
        name = names.get(int(task.name), "")
        group = next((label for prefix, label in _THREAD_GROUPS if name.startswith(prefix)), "other threads")
        found[group] = found.get(group, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return found


def dbos_steps(url: str, run_id: str) -> list[tuple[str, int, int]]:
    """The DBOS steps recorded for ``run_id``'s workflow: name, start and end (ms since the epoch), in order."""
    import psycopg

    query = (
        "SELECT function_name, started_at_epoch_ms, completed_at_epoch_ms FROM dbos.operation_outputs"
        " WHERE workflow_uuid = %s ORDER BY function_id"
    )
    with psycopg.connect(url) as conn:
        rows = conn.execute(query, (run_id,)).fetchall()
    return [(str(name), int(start or 0), int(end or 0)) for name, start, end in rows]


def step_breakdown(rows: list[tuple[str, int, int]], steps: int) -> str:
    """Per loop step: how many DBOS steps of each kind, the time inside their bodies, and the time between them."""
    inside: dict[str, float] = {}
    count: dict[str, int] = {}
    for name, start, end in rows:
        inside[name] = inside.get(name, 0.0) + (end - start) / 1e3
        count[name] = count.get(name, 0) + 1
    between = sum(max(0, b[1] - a[2]) for a, b in pairwise(rows)) / 1e3
    turns = steps + 1
    kinds = ", ".join(f"{count[n] / turns:.1f} {n} ({fmt_time(inside[n] / turns)})" for n in sorted(count))
    return (
        f"DBOS steps per loop step (last run, from dbos.operation_outputs): {len(rows) / turns:.1f}: {kinds} inside"
        f" their bodies; between them (DBOS checks for a recorded result and records it, two round trips each, in"
        f" its thread pool; the loop's own work) {fmt_time(between / turns)}"
    )


@contextlib.asynccontextmanager
async def dbos_pool(url: str, home: Path) -> AsyncIterator[SessionHost]:
    """One worker in this process and the face beside it, over database ``url``; the face's host."""
    from orchestrator.engine.worker import serving

    settings = EngineSettings(kind="dbos", database=url)
    config = LoomConfig(engine=settings)
    private_dir(home)
    async with (
        serving(settings, home, config, worker_id="bench-w1"),
        embedded_runtime(home, config=config) as runtime,
        SessionHost(runtime) as face,
    ):
        yield face


async def measure_step(server: PgServer, root: Path, repetitions: int, steps: int) -> Figure:
    """Median step of the same run on the DBOS engine against the embedded one, alternately ``repetitions`` times."""
    cwd = work_dir(private_dir(root))
    model = read_script(root / "read.json", steps)
    dbos_s: list[float] = []
    embedded_s: list[float] = []
    mean_dbos: list[float] = []
    mean_embedded: list[float] = []
    with database(server) as url:
        async with (
            embedded_runtime(private_dir(root / "embedded")) as runtime,
            SessionHost(runtime) as embedded,
            dbos_pool(url, root / "dbos") as dbos,
        ):
            await one_run(embedded, cwd, model, steps)  # warm-up: servers, imports, DBOS's first workflow
            await one_run(dbos, cwd, model, steps)
            cpu: dict[str, float] = {}
            embedded_cpu = 0.0
            run_id = ""
            for _ in range(repetitions):
                before = thread_cpu()
                _, times = await one_run(embedded, cwd, model, steps)
                embedded_cpu += sum(thread_cpu().values()) - sum(before.values())
                embedded_s.append(median(times))
                mean_embedded.append(sum(times) / len(times))
                before = thread_cpu()
                run_id, times = await one_run(dbos, cwd, model, steps)
                for group, seconds in thread_cpu().items():
                    cpu[group] = cpu.get(group, 0.0) + seconds - before.get(group, 0.0)
                dbos_s.append(median(times))
                mean_dbos.append(sum(times) / len(times))
            rows = await anyio.to_thread.run_sync(dbos_steps, url, run_id)
    loop_steps = repetitions * (steps + 1)
    cpu_note = (
        f"CPU per loop step in this process: embedded {fmt_time(embedded_cpu / loop_steps)}; DBOS"
        f" {fmt_time(sum(cpu.values()) / loop_steps)}: "
        + ", ".join(f"{group} {fmt_time(t / loop_steps)}" for group, t in sorted(cpu.items(), key=lambda kv: -kv[1]))
        + " (Postgres's own CPU not included)"
    )
    ratio, spread = paired_ratio(dbos_s, embedded_s)
    return Figure(
        key=STEP_KEY,
        title=STEP_TITLE,
        measured=f"{fmt_time(median(dbos_s))} vs {fmt_time(median(embedded_s))} per step",
        ratio=ratio,
        target=STEP_TARGET,
        ratio_range=spread,
        notes=[
            f"median step of {repetitions} runs × {steps} steps of turn + fs__read on each engine, alternately; a step"
            " = the time between two stored tool_call_finished; DBOS: one worker in this process, the face beside it,"
            " Postgres on 127.0.0.1; embedded: SQLite; mean step DBOS"
            f" {fmt_time(median(mean_dbos))}, embedded {fmt_time(median(mean_embedded))}",
            step_breakdown(rows, steps),
            cpu_note,
        ],
        data={"dbos_step_s": dbos_s, "embedded_step_s": embedded_s, "cpu_s": cpu, "dbos_steps": rows},
    )


def attempt(key: str, title: str, run: Callable[[], Figure]) -> Figure:
    """``run()``'s figure, or a MISS saying which bounded wait ran out (the group goes on to its next figure)."""
    try:
        return run()
    except TimeoutError as exc:
        reason = f"a bounded wait ran out ({type(exc).__name__}); the figure could not be measured"
        return Figure(key, title, "not measured", math.inf, 1.0, miss_reason=reason)


def measure(where: Path, *, quick: bool) -> list[Figure]:
    """The engine group: its figures, or none (after printing why) when Postgres is not installed."""
    from benchmarks import engine_pool

    started = time.perf_counter()
    reps = 3 if quick else 7
    try:
        with postgres_server() as server:
            figures = [attempt(STEP_KEY, STEP_TITLE, lambda: anyio.run(measure_step, server, where / "step", reps, 30))]
            figures.extend(engine_pool.measure(server, where, quick=quick))
    except NoPostgres as exc:
        print(f"engine: {exc}", flush=True)
        return []
    figures[-1].notes.append(f"the engine group took {time.perf_counter() - started:.0f} s, its cluster included")
    return figures
