"""The DBOS engine's pool of ``loom worker`` processes: throughput on one worker vs two, and the takeover time.

Workers are real ``loom worker --id ID`` processes of this venv, stopped with SIGTERM after and SIGKILLed if they
linger, on every way out; they share this process's group, so a Ctrl-C or a timeout that signals the group
reaches them too. Should this process be SIGKILLed, the cluster's watchdog (:mod:`tests.pg`) stops Postgres and a
worker that cannot record its heartbeat stops by itself (11 s after, measured). The face is this process
(``embedded_runtime`` over the home whose ``config.json`` chooses the dbos engine, as ``loom serve`` opens it, and
a ``SessionHost`` whose ``start_run`` enqueues). Workers and face share one home and one fresh database per figure.

* throughput (:func:`measure_throughput`): 50 scripted sessions, one run each of a few ``fs__read`` steps, all
  enqueued at once; the wall time from the first ``start_run`` to the last run's end seen by the face, on one worker
  (concurrency 50) and on two (concurrency 25 each): the same 50 runs in flight either way, so the difference is
  what a second process adds, nothing else. The sessions are opened before the clock starts.
* takeover (:func:`measure_takeover`): two workers with ``heartbeatS`` 0.5 and ``takeoverAfterS`` 2; a long run
  starts, and once it has stored a few steps the worker holding it (DBOS's record of its executor) is SIGKILLed.
  The figure is the time from the kill to the first event of that run the other worker stores after its takeover
  notice (the next step's record), as this process first reads it from the store (polled every 10 ms).
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import subprocess
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from anyio.abc import Process

from benchmarks._procs import cpu_seconds, loom_env
from benchmarks._report import Figure, fmt_time, median
from benchmarks.engine import (
    RUN_TIMEOUT_S,
    PgServer,
    attempt,
    check_finished,
    database,
    private_dir,
    read_script,
    settled,
    work_dir,
)
from benchmarks.startup import loom_script
from orchestrator.config import load_config
from orchestrator.engine.settings import DEFAULT_HEARTBEAT_S, DEFAULT_TAKEOVER_AFTER_S
from orchestrator.events import Event, Notice, ToolCallFinished, event_run_id
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.host import SessionHost

RUNS = 50
RUN_STEPS = 3
THROUGHPUT_KEY, THROUGHPUT_TITLE = "engine_throughput", f"{RUNS} runs: two workers vs one"
TAKEOVER_KEY, TAKEOVER_TITLE = "engine_takeover", "takeover: SIGKILL → next step elsewhere"
THROUGHPUT_GAIN = 1.5
"""Two workers must give at least this many times one worker's throughput."""
HEARTBEAT_S = 0.5
TAKEOVER_AFTER_S = 2.0
TAKEOVER_BOUND_S = TAKEOVER_AFTER_S + 2 * HEARTBEAT_S + 1.0
JOIN_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 15.0
POLL_S = 0.01


@dataclass
class WorkerProcess:
    """One ``loom worker`` process."""

    worker_id: str
    proc: Process
    stderr: Path

    def text(self) -> str:
        """What it wrote to stderr so far."""
        return self.stderr.read_text(errors="replace") if self.stderr.exists() else ""

    def joined(self) -> bool:
        """Whether it said it joined the pool; raises if it exited instead."""
        if self.proc.returncode is not None:
            raise RuntimeError(f"loom worker {self.worker_id} exited {self.proc.returncode}:\n{self.text()[-2000:]}")
        return "joined the pool" in self.text()


@dataclass
class Workers:
    """The ``loom worker`` processes of one home."""

    home: Path
    cwd: Path
    running: dict[str, WorkerProcess] = field(default_factory=dict[str, WorkerProcess])

    async def spawn(self, worker_id: str, concurrency: int) -> WorkerProcess:
        """Start ``loom worker --id worker_id`` and wait until it has joined the pool."""
        stderr = self.home / f"{worker_id}.stderr"
        with stderr.open("wb") as err:
            proc = await anyio.open_process(
                [str(loom_script()), "worker", "--id", worker_id, "--concurrency", str(concurrency)],
                cwd=self.cwd,
                env=loom_env(self.home),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )  # in this process's group: a Ctrl-C or a timeout that kills the group reaches the workers too
        worker = WorkerProcess(worker_id, proc, stderr)
        self.running[worker_id] = worker
        with anyio.fail_after(JOIN_TIMEOUT_S):
            while True:
                if worker.joined():
                    break
                await anyio.sleep(0.05)
        return worker

    async def sigkill(self, worker_id: str) -> None:
        """SIGKILL the worker, as a machine's crash would, and reap it."""
        worker = self.running.pop(worker_id)
        _kill(worker.proc)
        await worker.proc.wait()

    async def stop_all(self) -> None:
        """SIGTERM every worker (each leaves the pool), wait a bounded time, then SIGKILL what is left."""
        for worker in self.running.values():
            if worker.proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    worker.proc.send_signal(signal.SIGTERM)
        with anyio.move_on_after(STOP_TIMEOUT_S):
            for worker in self.running.values():
                await worker.proc.wait()
        for worker in self.running.values():
            _kill(worker.proc)  # what lingers
            await worker.proc.wait()
        self.running.clear()


def _kill(proc: Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        proc.kill()


@dataclass
class Pool:
    """The face (this process's host) and the worker processes, over one home and one database."""

    face: SessionHost
    workers: Workers

    @property
    def cwd(self) -> Path:
        """The sessions' working directory."""
        return self.workers.cwd

    async def events(self, session_id: str) -> list[Event]:
        """The session's stored events, as the face reads them."""
        return await self.face.runtime.log.store.read_events(session_id)


@contextlib.asynccontextmanager
async def pool(
    url: str,
    root: Path,
    first: dict[str, int],
    *,
    heartbeat_s: float = DEFAULT_HEARTBEAT_S,
    takeover_after_s: float = DEFAULT_TAKEOVER_AFTER_S,
) -> AsyncIterator[Pool]:
    """A home for the dbos engine over ``url``, the workers ``first`` (id: concurrency) joined, and the face.

    The face opens once a worker has created DBOS's tables; every worker is stopped on the way out.
    """
    home = private_dir(root / "home")
    workers = Workers(home, work_dir(root))
    engine = {"kind": "dbos", "database": url, "heartbeatS": heartbeat_s, "takeoverAfterS": takeover_after_s}
    (home / "config.json").write_text(json.dumps({"engine": engine}), encoding="utf-8")
    config = load_config(home, workers.cwd)
    try:
        for worker_id, concurrency in first.items():
            await workers.spawn(worker_id, concurrency)
        async with embedded_runtime(home, config=config) as runtime, SessionHost(runtime) as face:
            yield Pool(face, workers)
    finally:
        with anyio.CancelScope(shield=True):
            await workers.stop_all()


@dataclass
class Batch:
    """One batch of runs: its wall time, where the runs went, and the CPU each side used meanwhile."""

    wall_s: float
    by_worker: dict[str, int]
    cpu_s: dict[str, float]
    """CPU seconds during the batch: ``workers`` (all of them), ``face`` (this process) and ``postgres``."""


def _cpu(pool: Pool, server: PgServer) -> dict[str, float]:
    face = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "workers": sum(cpu_seconds(w.proc.pid) for w in pool.workers.running.values()),
        "face": face.ru_utime + face.ru_stime,
        "postgres": server.cpu_seconds(),
    }


async def _batch(pool: Pool, server: PgServer, script: Path, runs: int, steps: int) -> Batch:
    """``runs`` sessions opened, then their runs started at once and waited for."""
    from orchestrator.models.scripted import ScriptedModel

    model = ScriptedModel.from_file(script)
    sessions = [await pool.face.create_session(pool.cwd, model, mode="bypass", headless=True) for _ in range(runs)]
    cpu_before = _cpu(pool, server)
    started = time.perf_counter()
    handles = [await pool.face.start_run(s.id, "Benchmark the pool.", steps + 1) for s in sessions]
    with anyio.fail_after(RUN_TIMEOUT_S * 2):
        for handle in handles:
            await pool.face.wait(handle.run_id, RUN_TIMEOUT_S * 2)
    elapsed = time.perf_counter() - started
    cpu = {k: v - cpu_before[k] for k, v in _cpu(pool, server).items()}
    by_worker: dict[str, int] = {}
    for session, handle in zip(sessions, handles, strict=True):
        check_finished(await pool.events(session.id), handle.run_id, steps)
        record = await pool.face.runtime.log.store.get_run(handle.run_id)
        owner = record.owner.removeprefix("worker:") if record is not None else "?"
        by_worker[owner] = by_worker.get(owner, 0) + 1
    await settled(pool.face, [h.run_id for h in handles])
    return Batch(elapsed, by_worker, cpu)


def _cpu_note(label: str, batch: Batch) -> str:
    busy = sum(batch.cpu_s.values()) / (batch.wall_s * (os.cpu_count() or 1))
    return (
        f"{label}: {batch.wall_s:.2f} s wall, CPU "
        + ", ".join(f"{k} {v:.1f} s" for k, v in batch.cpu_s.items())
        + f" = {busy:.0%} of {os.cpu_count()} CPUs; runs per worker "
        + ", ".join(f"{k} {v}" for k, v in sorted(batch.by_worker.items()))
    )


async def measure_throughput(server: PgServer, root: Path, repetitions: int) -> Figure:
    """Throughput of :data:`RUNS` concurrent runs on two workers against one (wall time of the batch)."""
    script = private_dir(root) / "runs.json"
    read_script(script, RUN_STEPS)
    ones: list[Batch] = []
    twos: list[Batch] = []
    for rep in range(repetitions):
        with database(server) as url:
            async with pool(url, root / f"one-{rep}", {"solo": RUNS}) as one:
                await _batch(one, server, script, 4, RUN_STEPS)  # warm-up: the worker's first sessions and workflows
                ones.append(await _batch(one, server, script, RUNS, RUN_STEPS))
        with database(server) as url:
            async with pool(url, root / f"two-{rep}", {"left": RUNS // 2, "right": RUNS - RUNS // 2}) as two:
                await _batch(two, server, script, 8, RUN_STEPS)
                twos.append(await _batch(two, server, script, RUNS, RUN_STEPS))
    gains = [o.wall_s / t.wall_s for o, t in zip(ones, twos, strict=True)]
    gain = median(gains)
    one_s, two_s = median([b.wall_s for b in ones]), median([b.wall_s for b in twos])
    return Figure(
        key=THROUGHPUT_KEY,
        title=THROUGHPUT_TITLE,
        measured=f"two workers {gain:.2f}× one's throughput ({fmt_time(two_s)} vs {fmt_time(one_s)}) vs ≥ 1.5×",
        ratio=THROUGHPUT_GAIN / gain,
        target=1.0,
        ratio_range=(THROUGHPUT_GAIN / max(gains), THROUGHPUT_GAIN / min(gains)) if len(gains) > 1 else None,
        notes=[
            f"{RUNS} sessions × one run of {RUN_STEPS} turn + fs__read steps, enqueued at once by the face in this"
            f" process, wall time from the first start_run to the last run's end; `loom worker` processes: one"
            f" (concurrency {RUNS}) vs two (concurrency {RUNS // 2} each), {repetitions} time(s) each, one then two;"
            f" ratio = 1.5 / (wall(one) / wall(two))",
            _cpu_note("one worker (last)", ones[-1]),
            _cpu_note("two workers (last)", twos[-1]),
        ],
        data={
            "one_worker_s": [b.wall_s for b in ones],
            "two_workers_s": [b.wall_s for b in twos],
            "cpu_one_s": [b.cpu_s for b in ones],
            "cpu_two_s": [b.cpu_s for b in twos],
        },
    )


async def _kill_and_time(pool: Pool, script: Path, steps: int) -> dict[str, float | str]:
    """One long run; SIGKILL its worker after a few steps; seconds to the takeover notice and to the next step."""
    from orchestrator.models.scripted import ScriptedModel

    assert pool.face.remote is not None
    session = await pool.face.create_session(pool.cwd, ScriptedModel.from_file(script), mode="bypass", headless=True)
    handle = await pool.face.start_run(session.id, "Run long enough to be killed.", steps + 1)
    with anyio.fail_after(RUN_TIMEOUT_S):
        while True:
            if sum(isinstance(e, ToolCallFinished) for e in await pool.events(session.id)) >= 5:
                break
            await anyio.sleep(POLL_S)
    holder = await pool.face.remote.holder(handle.run_id)
    if holder not in pool.workers.running:
        raise AssertionError(f"run {handle.run_id} is held by {holder!r}, not by a worker of this pool")
    await pool.workers.sigkill(holder)
    killed = time.perf_counter()
    seen = max(e.seq or 0 for e in await pool.events(session.id))
    notice_s: float | None = None
    with anyio.fail_after(RUN_TIMEOUT_S):
        while True:
            new = [e for e in await pool.events(session.id) if (e.seq or 0) > seen and event_run_id(e) == handle.run_id]
            now = time.perf_counter() - killed
            if notice_s is None and any(isinstance(e, Notice) for e in new):
                notice_s = now
            step = [e for e in new if not isinstance(e, Notice)]
            if step:
                break
            await anyio.sleep(POLL_S)
    await pool.face.wait(handle.run_id, RUN_TIMEOUT_S)
    check_finished(await pool.events(session.id), handle.run_id, steps)
    return {"killed": holder, "notice_s": notice_s if notice_s is not None else now, "next_step_s": now}


async def measure_takeover(server: PgServer, root: Path, kills: int) -> Figure:
    """Time from SIGKILL of the worker holding a run to that run's next stored step on another worker."""
    script = private_dir(root) / "long.json"
    steps = 40
    read_script(script, steps, delay_s=0.05)
    found: list[dict[str, float | str]] = []
    with database(server) as url:
        beats = {"heartbeat_s": HEARTBEAT_S, "takeover_after_s": TAKEOVER_AFTER_S}
        async with pool(url, root / "pool", {"k0": 4, "k1": 4}, **beats) as two:
            for kill in range(kills):
                found.append(await _kill_and_time(two, script, steps))
                if kill + 1 < kills:
                    await two.workers.spawn(f"k{kill + 2}", 4)  # two workers again for the next kill
    worst = max(float(f["next_step_s"]) for f in found)
    return Figure(
        key=TAKEOVER_KEY,
        title=TAKEOVER_TITLE,
        measured=(
            f"{fmt_time(worst)} vs takeoverAfterS {TAKEOVER_AFTER_S:g} s + 2 × heartbeatS {HEARTBEAT_S:g} s + 1 s"
            f" = {TAKEOVER_BOUND_S:g} s"
        ),
        ratio=worst / TAKEOVER_BOUND_S,
        target=1.0,
        notes=[
            f"worst of {kills} SIGKILL(s) of the `loom worker` holding a {steps}-step run (two workers, heartbeatS"
            f" {HEARTBEAT_S:g}, takeoverAfterS {TAKEOVER_AFTER_S:g}), after its 5th stored step; to the next step"
            " stored by the other worker, as the face reads it (polled every 10 ms): median"
            f" {fmt_time(median([float(f['next_step_s']) for f in found]))}; to the takeover notice: median"
            f" {fmt_time(median([float(f['notice_s']) for f in found]))}",
        ],
        data={"kills": found, "bound_s": TAKEOVER_BOUND_S},
    )


def measure(server: PgServer, where: Path, *, quick: bool) -> list[Figure]:
    """The throughput and takeover figures."""
    return [
        attempt(
            THROUGHPUT_KEY,
            THROUGHPUT_TITLE,
            lambda: anyio.run(measure_throughput, server, where / "throughput", 1 if quick else 2),
        ),
        attempt(
            TAKEOVER_KEY,
            TAKEOVER_TITLE,
            lambda: anyio.run(measure_takeover, server, where / "takeover", 1 if quick else 3),
        ),
    ]
