"""How long an interrupted 1,000-step run takes to resume: from runtime start to its next model request.

Issue 5's target: a 1,000-step run resumed in under a second after a restart.

**The crashed run** is real. A child process opens the runtime the way ``embedded_runtime`` does
(``CheckpointStore`` + ``EventLog`` + ``Runtime``, fs and shell attached through ``open_session``)
and runs a scripted model whose every turn reads a 6-byte file with ``fs__read``. Its store is
wrapped (delegation) so that, as soon as the batch holding the last step's ``tool_call_started`` is
stored, the process SIGKILLs itself: the run dies in step N's tool call, as in a crash, with its
WAL un-checkpointed and its owner gone.

**The resume** is what ``loom resume RUN`` does in process (``clients/cli/resume.py``), timed in the
benchmark process on a fresh copy of the crashed home for every repetition: open the store (which
recovers the WAL), ``Runtime.mark_interrupted``, look up the run and session, ``open_session`` with
the session id (reads every event, rebuilds the history, connects fs, shell, memory and Loom's own
tools), then ``Session.resume`` (reuses those events, finds the resume point, records ``run_resumed``, runs
the interrupted ``fs__read`` again since it is read-only, records its result) until the model is
called. The interpreter's import time is not included: figure 2 measures that floor separately.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import anyio

from benchmarks._report import Figure, fmt_time, median
from benchmarks.loop import StampingModel, read_script
from benchmarks.store import CountingStore
from orchestrator.context.history import rebuild_history
from orchestrator.events import Event, RunResumed, ToolCallStarted
from orchestrator.home import DB_NAME
from orchestrator.loop.resume import find_resume_point
from orchestrator.models.scripted import ScriptedModel
from orchestrator.runtime.runtime import Runtime
from orchestrator.store.checkpoints import CheckpointStore
from orchestrator.store.eventlog import EventLog

TARGET_S = 1.0
"""A 1,000-step run resumed in under a second."""
BUILD_TIMEOUT_S = 300.0
REPO_ROOT = Path(__file__).resolve().parents[1]
TINY = "tiny.txt"


class KillingStore(CountingStore):
    """Forwards to the real store; SIGKILLs this process once step ``kill_at``'s tool call has started."""

    def __init__(self, inner: CheckpointStore, kill_at: int) -> None:
        super().__init__(inner)
        self.kill_at = kill_at

    async def append(self, events: Sequence[Event]) -> None:
        """Forward; then die if the batch started the fatal step's tool call."""
        await self.inner.append(events)
        if any(isinstance(e, ToolCallStarted) and e.step == self.kill_at for e in events):
            os.kill(os.getpid(), signal.SIGKILL)


async def _crash_run(home: Path, cwd: Path, steps: int) -> None:
    async with CheckpointStore(home / DB_NAME) as store:
        runtime = Runtime(EventLog(KillingStore(store, steps)), home=home)
        async with runtime.open_session(cwd, read_script(steps, TINY)) as session:
            await session.run("Read the tiny file many times.", max_steps=steps + 10)
    raise AssertionError("the run was not killed")


def crash_child(home: str, cwd: str, steps: int) -> None:
    """Entry point of the child process: run ``steps`` steps and die in the last one's tool call."""
    anyio.run(_crash_run, Path(home), Path(cwd), steps)


def build_crashed(home: Path, cwd: Path, steps: int) -> float:
    """Leave an interrupted ``steps``-step run in ``home`` (a SIGKILLed child); returns the child's seconds."""
    cwd.mkdir(parents=True, exist_ok=True)
    (cwd / TINY).write_text("hello\n", encoding="utf-8")
    code = f"from benchmarks.resume import crash_child; crash_child({str(home)!r}, {str(cwd)!r}, {steps})"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S
    )
    if done.returncode != -signal.SIGKILL:
        raise AssertionError(f"the crash child exited {done.returncode}, not by SIGKILL:\n{done.stderr[-2000:]}")
    return time.perf_counter() - started


def copy_home(source: Path, target: Path) -> None:
    """The database, its WAL and shared-memory index as the crash left them."""
    target.mkdir(parents=True)
    for name in (DB_NAME, f"{DB_NAME}-wal", f"{DB_NAME}-shm"):
        if (source / name).exists():
            shutil.copy2(source / name, target / name)


async def resume_once(home: Path, cwd: Path, steps: int) -> dict[str, float]:
    """Resume the crashed run in ``home`` (headless, as ``loom resume`` does); the times of its phases."""
    model = StampingModel(ScriptedModel.from_turns([{"text": "Done."}]))
    marks = {"start": time.perf_counter()}
    async with CheckpointStore(home / DB_NAME) as inner:
        store = CountingStore(inner)
        runtime = Runtime(EventLog(store), home=home)
        marks["open store"] = time.perf_counter()
        interrupted = await runtime.mark_interrupted()
        marks["mark interrupted"] = time.perf_counter()
        if len(interrupted) != 1:
            raise AssertionError(f"expected one interrupted run, found {interrupted}")
        run_id = interrupted[0]
        record = await store.get_run(run_id)
        session_record = await store.get_session(record.session_id) if record is not None else None
        if session_record is None:
            raise AssertionError(f"run {run_id} or its session is missing")
        marks["look up run"] = time.perf_counter()
        async with runtime.open_session(cwd, model, session_id=session_record.id, headless=True) as session:
            marks["open session"] = time.perf_counter()
            history_len = len(session.history)
            result = await session.resume(run_id)
        if result.status != "completed":
            raise AssertionError(f"the resumed run ended {result.status}: {result.reason}")
        marks["first model request"] = model.stamps[0]
        events = await inner.read_events(session_record.id)
    resumed = [e for e in events if isinstance(e, RunResumed)]
    if len(resumed) != 1 or len(resumed[0].rerun) != 1 or resumed[0].after_step != steps:
        raise AssertionError(f"expected a resume after step {steps} running one call again, got {resumed}")
    names = list(marks)
    times = {f"{b}": marks[b] - marks[a] for a, b in zip(names, names[1:], strict=False)}
    times["total"] = marks["first model request"] - marks["start"]
    reads = [c.seconds for c in store.calls if c.method == "read_events"]
    times["read_events (each)"] = median(reads) if reads else 0.0
    times["store calls"] = float(len(store.calls))
    times["events"] = float(len(events))
    times["history messages"] = float(history_len)
    # CPU-only parts, timed standalone on the events as they are now (the resumed run adds a handful)
    started = time.perf_counter()
    find_resume_point(events, run_id)
    times["find_resume_point"] = time.perf_counter() - started
    started = time.perf_counter()
    rebuild_history(events)
    times["rebuild_history"] = time.perf_counter() - started
    return times


async def _resume_all(base: Path, crashed: Path, cwd: Path, steps: int, repetitions: int) -> list[dict[str, float]]:
    copy_home(crashed, base / "warm-up")
    await resume_once(base / "warm-up", cwd, steps)  # warm-up: page cache, validators
    results = []
    for rep in range(repetitions):
        home = base / f"resume-{rep}"
        copy_home(crashed, home)
        results.append(await resume_once(home, cwd, steps))
    return results


def measure(base: Path, steps: int, repetitions: int) -> Figure:
    """Resume time of an interrupted ``steps``-step run against the one-second budget (runs its own event loop)."""
    crashed, cwd = base / "crashed", base / "work"
    build_s = build_crashed(crashed, cwd, steps)
    wal_bytes = (crashed / f"{DB_NAME}-wal").stat().st_size if (crashed / f"{DB_NAME}-wal").exists() else 0
    results = anyio.run(_resume_all, base, crashed, cwd, steps, repetitions)
    total = [r["total"] for r in results]
    ours = median(total)
    phases = ("open store", "mark interrupted", "look up run", "open session", "first model request")
    breakdown = {p: median([r[p] for r in results]) for p in phases}
    first = results[0]
    return Figure(
        key="resume",
        title=f"resume a {steps:,}-step run",
        measured=f"{fmt_time(ours)} to the next model request vs {fmt_time(TARGET_S)} budget",
        ratio=ours / TARGET_S,
        target=1.0,
        ratio_range=(min(total) / TARGET_S, max(total) / TARGET_S),
        notes=[
            f"median of {repetitions} resumes, each on a fresh copy of a run SIGKILLed in step {steps}'s fs__read"
            f" ({int(first['events']):,} events, {int(first['history messages']):,} messages, WAL"
            f" {wal_bytes / 2**20:.1f} MiB un-checkpointed; built in {build_s:.1f} s); runtime start, imports excluded",
            "phases (medians): "
            + ", ".join(f"{p} {fmt_time(v)}" for p, v in breakdown.items())
            + " (the last: Session.resume up to the model call, with the read-only call run again)",
            f"inside: read_events of the whole session {fmt_time(median([r['read_events (each)'] for r in results]))}"
            f" (once, by open_session: the resume reuses those events), find_resume_point"
            f" {fmt_time(median([r['find_resume_point'] for r in results]))}, rebuild_history"
            f" {fmt_time(median([r['rebuild_history'] for r in results]))} (timed standalone)",
        ],
        data={"steps": steps, "build_s": build_s, "wal_bytes": wal_bytes, "resumes": results},
    )
