"""Crash test on the DBOS engine: SIGKILL the worker holding a run; the other worker finishes every run.

The durability crash test (:mod:`tests.durability.test_crash_resume`) run on the distributed engine: the same
planned model (a fake Anthropic API answering from the conversation alone), the same counting server (one fsynced
line per execution, before anything else), but the runs are enqueued by a face over a shared Postgres database and
driven by two ``loom worker`` processes. Each round starts a few runs, SIGKILLs the worker that holds one of them at
a random moment (seeded), and starts a new worker under a new id, so that the runs are finished by the survivor
through the pool's takeover. After each round:

* every run ended ``completed`` with its final text, or ``needs_review`` (headless: a side-effecting call was in
  flight when its worker died, and nothing ran it again);
* no side-effecting key executed twice; every read-only and idempotent call of a completed run executed;
* every execution has a stored ``tool_call_started`` with its key (intent is durable before the effect);
* every event read before the kill is still stored, identical, at the same seq;
* the store holds together: each session's seqs run 1..N, each run has exactly one ``run_finished``, every call of
  an assistant message is started after it and before the next one, and no call finished twice.

Default mode does 20 kills, up to four a round on the same run (each on the worker that took it over from the last
one, once DBOS names it; about two minutes at load 2);
long mode (``pytest --long`` or ``LOOM_LONG_TESTS=1``) 100.
``LOOM_CRASH_SEED=N`` replays a seed's plans and kill times.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import psycopg
import pytest

from orchestrator.config import load_config
from orchestrator.events import AssistantMessage, Event, Notice, RunFinished, ToolCallFinished, ToolCallStarted
from orchestrator.models import resolve_model
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.host import SessionHost
from tests.clients.cli_support import REPO_ROOT
from tests.durability.counting_server import RECORD_ENV, executions
from tests.durability.test_crash_resume import (
    COUNTING_SERVER,
    MODEL,
    PROMPT,
    SIDE_EFFECTING,
    long_mode,
    plan,
    planned_s,
    serve_planned_model,
)
from tests.orchestrator.engine.worker_process import WorkerProcess, spawn_worker

pytestmark = pytest.mark.anyio

DEFAULT_KILLS = 20
LONG_KILLS = 100
RUNS_PER_ROUND = 3
KILLS_PER_ROUND = 4
ROUND_TIMEOUT_S = 60.0
HEARTBEAT_S = 0.3
TAKEOVER_AFTER_S = 1.5


@dataclass
class Run:
    label: str
    session_id: str
    run_id: str


@dataclass
class CrashTest:
    root: Path
    seed: int
    env: dict[str, str]
    database: str
    workers: dict[str, WorkerProcess] = field(default_factory=dict)
    runs: list[Run] = field(default_factory=list)
    sessions: list[str] = field(default_factory=list)
    kills: int = 0
    spawned: int = 0
    takeovers: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    phases: dict[str, float] = field(default_factory=dict)
    """Seconds spent in each phase of the rounds, summed (the summary line shows where the time goes)."""

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.home = self.root / "home"
        self.project = self.root / "project"
        self.project.mkdir(parents=True)
        self.home.mkdir(mode=0o700)
        self.record_file = self.root / "executions.jsonl"
        server = {
            "command": sys.executable,
            "args": [str(COUNTING_SERVER), f"--marker={self.root}"],
            "env": {"PYTHONPATH": str(REPO_ROOT), RECORD_ENV: str(self.record_file)},
        }
        engine = {
            "kind": "dbos",
            "database": self.database,
            "heartbeatS": HEARTBEAT_S,
            "takeoverAfterS": TAKEOVER_AFTER_S,
            "concurrency": RUNS_PER_ROUND,
        }
        config = {"mcpServers": {"counter": server}, "engine": engine}
        (self.home / "config.json").write_text(json.dumps(config), encoding="utf-8")

    def where(self, what: str) -> str:
        return f"seed={self.seed} kill#{self.kills + 1} {what}"

    # -- workers

    def spawn(self) -> WorkerProcess:
        worker = spawn_worker(f"w{self.spawned}", self.home, self.project, self.env)
        self.spawned += 1
        self.workers[worker.worker_id] = worker
        return worker

    async def joined(self, worker: WorkerProcess) -> None:
        await worker.joined()

    def sigkill(self, worker_id: str) -> None:
        self.workers.pop(worker_id).sigkill()
        self.kills += 1

    def stop_all(self) -> None:
        for worker in self.workers.values():
            worker.kill_group()
        self.workers.clear()

    # -- the round

    async def round(self, host: SessionHost) -> None:
        assert host.remote is not None
        store = host.runtime.log.store
        clock = time.monotonic()

        def phase(name: str) -> None:
            nonlocal clock
            now = time.monotonic()
            self.phases[name] = self.phases.get(name, 0.0) + now - clock
            clock = now

        if not self.sessions:  # opened once: each worker opens a session (and starts its servers) once, too
            model = resolve_model(MODEL, base_dir=self.project)
            for _ in range(RUNS_PER_ROUND):
                session = await host.create_session(self.project, model, mode="bypass", headless=True)
                self.sessions.append(session.id)
        started: list[Run] = []
        for session_id in self.sessions:
            label = f"r{len(self.runs) + len(started)}"
            handle = await host.start_run(session_id, PROMPT + label, 40)
            started.append(Run(label, session_id, handle.run_id))
        self.runs.extend(started)
        phase("start runs")
        victim = self.rng.choice(started)
        fractions = [self.rng.uniform(0.05, 0.9) for _ in range(KILLS_PER_ROUND)]
        where = self.where(f"(run {victim.label}, SIGKILLs {', '.join(f'{f:.2f}' for f in fractions)} of the way)")
        acked = {run.session_id: await store.read_events(run.session_id) for run in started}
        replacements: list[WorkerProcess] = []
        for fraction in fractions:
            # Each kill lands within the victim's run, on whichever worker holds it by then (the next one on the
            # worker that took it over from the last, once it has: until then DBOS still names the dead one).
            with anyio.fail_after(ROUND_TIMEOUT_S):
                while True:
                    if (holder := await host.remote.holder(victim.run_id)) in self.workers:
                        break
                    if (await host.view(victim.run_id)).status in ("completed", "needs_review", "failed"):
                        break
                    await anyio.sleep(0.02)
            if holder not in self.workers:
                break  # the victim's run ended
            await anyio.sleep(fraction * planned_s(plan(self.seed, victim.label)))
            holder = await host.remote.holder(victim.run_id) or holder
            phase("until the kill")
            acked = {run.session_id: await store.read_events(run.session_id) for run in started}
            if holder not in self.workers:
                break
            self.sigkill(holder)
            replacements.append(self.spawn())
        try:
            with anyio.fail_after(ROUND_TIMEOUT_S):
                for run in started:
                    while (await host.view(run.run_id)).status not in ("completed", "needs_review", "failed"):
                        await host.wait(run.run_id, 1.0)
        except TimeoutError:
            raise AssertionError(f"{where}: runs did not end\n{await self.diagnose(host, started)}") from None
        phase("runs end")
        for replacement in replacements:
            await self.joined(replacement)
        phase("replacement joins")
        for run in started:
            await self.check_run(host, run, acked[run.session_id], where)
        self.check_executions(where)

    async def check_run(self, host: SessionHost, run: Run, acked: list[Event], where: str) -> None:
        store = host.runtime.log.store
        events = await store.read_events(run.session_id)
        where = f"{where} run {run.label}"
        assert [e.seq for e in events] == list(range(1, len(events) + 1)), f"{where}: seqs {[e.seq for e in events]}"
        assert [e.model_dump() for e in events[: len(acked)]] == [e.model_dump() for e in acked], (
            f"{where}: an event read before the kill changed or went missing"
        )
        ended = [e for e in events if isinstance(e, RunFinished) and e.run_id == run.run_id]
        assert len(ended) == 1, f"{where}: {len(ended)} run_finished events"
        finished_runs = Counter(e.run_id for e in events if isinstance(e, RunFinished))
        assert all(n == 1 for n in finished_runs.values()), f"{where}: a run finished twice: {finished_runs}"
        end = ended[0]
        self.statuses[end.status] += 1
        self.takeovers += sum(
            1 for e in events if isinstance(e, Notice) and "took over" in e.text and e.run_id == run.run_id
        )
        counts = self.counts()
        turns = plan(self.seed, run.label)
        keys = [(tool, key) for turn in turns for tool, key, _ in turn.calls]
        if end.status == "completed":
            assert end.final_text == f"done {run.label}", f"{where}: {end}"
            for tool, key in keys:
                if tool == SIDE_EFFECTING:
                    assert counts[key] == 1, f"{where}: {key} executed {counts[key]} times"
                else:
                    assert counts[key] >= 1, f"{where}: {tool} {key} never executed"
        else:
            assert end.status == "needs_review", f"{where}: ended {end.status}: {end.reason}"
            assert "needs review" in end.reason, f"{where}: {end.reason}"
        starts: dict[str, int] = {}
        finishes: Counter[str] = Counter()
        asked: list[tuple[int, list[str]]] = []
        for e in events:
            if isinstance(e, ToolCallStarted):
                starts.setdefault(e.call_id, e.seq or 0)
            elif isinstance(e, ToolCallFinished):
                finishes[e.call_id] += 1
            elif isinstance(e, AssistantMessage) and e.message.tool_uses:
                asked.append((e.seq or 0, [u.id for u in e.message.tool_uses]))
        assert all(n == 1 for n in finishes.values()), f"{where}: a call finished twice: {finishes}"
        for i, (seq, ids) in enumerate(asked):
            bound = asked[i + 1][0] if i + 1 < len(asked) else 1 << 60
            for call_id in ids:
                assert call_id in starts and seq < starts[call_id] < bound, (
                    f"{where}: call {call_id} not started: "
                    + " ".join(f"{e.seq}:{e.type}" for e in events if getattr(e, "run_id", "") == run.run_id)
                )

    async def diagnose(self, host: SessionHost, runs: list[Run]) -> str:
        """What DBOS and the store say of ``runs``, and what the workers printed (for a failure's message)."""
        lines: list[str] = []
        async with await psycopg.AsyncConnection.connect(self.database, autocommit=True) as conn:
            rows = await conn.execute(
                "SELECT workflow_uuid, status, executor_id, queue_name, recovery_attempts FROM dbos.workflow_status"
            )
            lines += [f"dbos: {row}" for row in await rows.fetchall()]
            rows = await conn.execute("SELECT id, state, taken_over_by, recovered FROM loom_engine.workers")
            lines += [f"pool: {row}" for row in await rows.fetchall()]
        for run in runs:
            events = await host.runtime.log.store.read_events(run.session_id, run_id=run.run_id)
            lines.append(f"{run.label} {run.run_id}: " + " ".join(f"{e.seq}:{e.type}" for e in events))
        for worker in self.workers.values():
            lines.append(f"--- {worker.worker_id}\n" + worker.text()[-3000:])
        return "\n".join(lines)

    def counts(self) -> Counter[str]:
        return Counter(line["key"] for line in executions(self.record_file))

    def check_executions(self, where: str) -> None:
        side = Counter(line["key"] for line in executions(self.record_file) if line["tool"] == SIDE_EFFECTING)
        twice = {k: n for k, n in side.items() if n > 1}
        assert not twice, f"{where}: side-effecting calls executed more than once: {twice}"

    async def intents(self, host: SessionHost, where: str) -> None:
        """Every execution has a stored start with its key: the intent was durable before the effect."""
        keys: set[str] = set()
        for run in self.runs:
            for e in await host.runtime.log.store.read_events(run.session_id):
                if isinstance(e, ToolCallStarted):
                    keys.add(str(e.arguments.get("key")))
        missing = {line["key"] for line in executions(self.record_file)} - keys
        assert not missing, f"{where}: executed without a stored start: {sorted(missing)}"

    def summary(self, elapsed: float) -> str:
        return (
            f"seed={self.seed}: {self.kills} kills, {len(self.runs)} runs {dict(self.statuses)}, "
            f"{self.takeovers} takeovers noted, {elapsed:.1f} s; "
            + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in self.phases.items())
        )


@pytest.mark.timeout(600)
async def test_killed_workers_runs_are_finished_by_the_other_worker(
    fresh_database: str, tmp_path: Path, pytestconfig: pytest.Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed = int(os.environ.get("LOOM_CRASH_SEED", random.randrange(1 << 30)))
    target = int(os.environ.get("LOOM_CRASH_KILLS", LONG_KILLS if long_mode(pytestconfig) else DEFAULT_KILLS))
    with serve_planned_model(seed) as model:
        env = {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": model.base_url}
        for key, value in env.items():
            monkeypatch.setenv(key, value)  # the face resolves the model spec too (it never calls it)
        test = CrashTest(tmp_path, seed, env, fresh_database)
        started = time.monotonic()
        try:
            first = [test.spawn(), test.spawn()]
            for worker in first:
                await test.joined(worker)
            config = load_config(test.home, test.project)
            async with embedded_runtime(test.home, config=config) as runtime, SessionHost(runtime) as host:
                while test.kills < target:
                    await test.round(host)
                await test.intents(host, test.where("at the end"))
        finally:
            test.stop_all()
        print(test.summary(time.monotonic() - started))
        assert test.kills >= target and test.statuses["completed"] > 0, test.summary(time.monotonic() - started)
