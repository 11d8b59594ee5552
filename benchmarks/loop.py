"""The agent loop's own cost per step, and whether it stays flat over a long run.

A step is what happens between two model calls: the scripted model plays its turn (a line of text
and one tool call), the hub checks the arguments, the assistant message and the call's start are
appended to the event log (the in-process checkpoints server's database append, which writes SQLite),
the tool is called in memory, and its result is appended the same way. The model
is wrapped so that it stamps ``perf_counter`` whenever the loop calls it; the difference between
consecutive stamps is one step.

The tool is the trivial ``bench__ping`` on an extra in-process server, so the step is compared with
the thing it cannot be cheaper than: two raw in-memory MCP calls (one standing in for the model's
turn, one for the tool). ``Runtime.open_session`` builds its own hub with only fs and shell, so this
part assembles the same pieces itself (``CheckpointStore`` + ``EventLog`` + ``Hub`` + ``Session``); a
second figure runs the real ``embedded_runtime``/``open_session`` path with ``fs__read`` of a tiny
file, for reference.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.shared.dispatcher import ProgressFnT

from benchmarks._report import Figure, fmt_time, median, paired_ratio
from benchmarks.calls import build_bench_server, raw_call_times
from orchestrator.events import Event, SessionCreated, ToolCallFinished
from orchestrator.hub.pool import Hub, ToolOutcome
from orchestrator.messages import ToolResultBlock
from orchestrator.models.base import Model, ModelEvent, ModelRequest
from orchestrator.models.scripted import ScriptedModel
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.runtime import Session, new_id
from orchestrator.store.checkpoints import CheckpointStore
from orchestrator.store.eventlog import EventLog
from orchestrator.store.interface import RunRecord, SessionRecord, SnapshotRecord, Store

STEP_TARGET = 2.0
FLATNESS_TARGET = 1.2
FLAT_STEPS = 200
FLAT_WINDOW = 20


class StampingModel:
    """A model that records ``perf_counter`` at the start of every call, then plays its inner model."""

    def __init__(self, inner: Model) -> None:
        self.inner = inner
        self.stamps: list[float] = []
        self.busy_s: list[float] = []
        """Time spent inside the inner model, per call."""

    @property
    def name(self) -> str:
        """The inner model's name."""
        return self.inner.name

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stamp, then forward the inner model's events."""
        started = time.perf_counter()
        self.stamps.append(started)
        busy = 0.0
        async for event in self.inner.stream(request):
            busy += time.perf_counter() - started
            yield event
            started = time.perf_counter()
        self.busy_s.append(busy + time.perf_counter() - started)

    def step_times(self) -> list[float]:
        """Seconds between consecutive model calls: one loop step each."""
        return [b - a for a, b in itertools.pairwise(self.stamps)]


def ping_script(steps: int) -> ScriptedModel:
    """``steps`` turns that each say a line and call ``bench__ping`` once, then a final answer."""
    turns: list[dict[str, Any]] = [
        {"text": f"Step {i}: pinging.", "tool_calls": [{"name": "bench__ping", "arguments": {"x": i}}]}
        for i in range(steps)
    ]
    turns.append({"text": "Done."})
    return ScriptedModel.from_turns(turns)


def read_script(steps: int, path: str) -> ScriptedModel:
    """Like :func:`ping_script`, but each turn reads a file with ``fs__read``.

    Each read asks for a different last line past the file's end: the same text comes back, but the calls differ,
    so loop detection (on by default) takes the run for progress and checks it the way it checks any step whose
    result repeats (arguments compared), instead of stopping it after 5 identical steps.
    """
    turns: list[dict[str, Any]] = [
        {
            "text": f"Step {i}: reading.",
            "tool_calls": [{"name": "fs__read", "arguments": {"path": path, "end_line": 1_000_000 + i}}],
        }
        for i in range(steps)
    ]
    turns.append({"text": "Done."})
    return ScriptedModel.from_turns(turns)


def _check_run(session: Session, steps: int, status: str, ran: int) -> None:
    if status != "completed" or ran != steps + 1:
        raise AssertionError(f"benchmark run ended {status} after {ran} steps; expected completed after {steps + 1}")
    errors = [
        block.content
        for message in session.history
        for block in message.content
        if isinstance(block, ToolResultBlock) and block.is_error
    ]
    if errors:
        raise AssertionError(f"{len(errors)} tool calls failed, e.g. {errors[0]}")


@dataclass
class BenchRig:
    """The loop's real pieces, plus the trivial ``bench`` server, over one SQLite file."""

    log: EventLog
    hub: TimingHub
    cwd: Path

    async def run(self, steps: int) -> StampingModel:
        """One fresh session whose run makes ``steps`` tool-calling steps; returns the stamped model."""
        model = StampingModel(ping_script(steps))
        session_id = new_id("s")
        await self.log.append(SessionCreated(session_id=session_id, cwd=str(self.cwd), model=model.name))
        session = Session(session_id, self.cwd, model, self.hub, self.log)
        result = await session.run("Benchmark the loop.", max_steps=steps + 1)
        _check_run(session, steps, result.status, result.steps)
        return model


@contextlib.asynccontextmanager
async def bench_rig(home: Path, *, store_wrapper: Callable[[Store], Store] | None = None) -> AsyncIterator[BenchRig]:
    """Open a store under ``home`` and a hub with the ``bench`` server (and nothing else)."""
    async with CheckpointStore(home / "loom.db") as store:
        log = EventLog(store_wrapper(store) if store_wrapper else store)
        async with TimingHub({"bench": build_bench_server()}) as hub:
            yield BenchRig(log, hub, home)


# -- instrumented pieces, for the breakdown of a step ---------------------------------------------


@dataclass
class TimingStore:
    """A :class:`~orchestrator.store.interface.Store` that times its inner store's appends."""

    inner: Store
    append_s: list[float] = field(default_factory=list[float])

    async def append(self, events: Sequence[Event]) -> None:
        """Time and forward."""
        started = time.perf_counter()
        await self.inner.append(events)
        self.append_s.append(time.perf_counter() - started)

    async def read_events(
        self,
        session_id: str,
        *,
        after_seq: int = 0,
        run_id: str | None = None,
        limit: int | None = None,
        before_seq: int | None = None,
    ) -> list[Event]:
        """Forward."""
        return await self.inner.read_events(
            session_id, after_seq=after_seq, run_id=run_id, limit=limit, before_seq=before_seq
        )

    async def get_session(self, session_id: str) -> SessionRecord | None:
        """Forward."""
        return await self.inner.get_session(session_id)

    async def set_session_title(self, session_id: str, title: str) -> bool:
        """Forward."""
        return await self.inner.set_session_title(session_id, title)

    async def get_run(self, run_id: str) -> RunRecord | None:
        """Forward."""
        return await self.inner.get_run(run_id)

    async def list_runs(self, session_id: str | None = None, limit: int = 50) -> list[RunRecord]:
        """Forward."""
        return await self.inner.list_runs(session_id, limit)

    async def list_sessions(self, *, include_archived: bool = False, limit: int = 100) -> list[SessionRecord]:
        """Forward."""
        return await self.inner.list_sessions(include_archived=include_archived, limit=limit)

    async def list_runs_with_status(self, status: str) -> list[RunRecord]:
        """Forward."""
        return await self.inner.list_runs_with_status(status)

    async def snapshot_file(self, session_id: str, checkpoint: str, path: str, content: bytes | None) -> bool:
        """Forward."""
        return await self.inner.snapshot_file(session_id, checkpoint, path, content)

    async def list_snapshots(self, session_id: str) -> list[SnapshotRecord]:
        """Forward."""
        return await self.inner.list_snapshots(session_id)

    async def read_snapshot(self, session_id: str, checkpoint: str, path: str) -> tuple[bool, bytes | None] | None:
        """Forward."""
        return await self.inner.read_snapshot(session_id, checkpoint, path)

    async def read_context_events(self, session_id: str) -> list[Event]:
        """Forward."""
        return await self.inner.read_context_events(session_id)

    async def find_tool_result(self, session_id: str, call_id: str) -> ToolCallFinished | None:
        """Forward."""
        return await self.inner.find_tool_result(session_id, call_id)


class TimingHub(Hub):
    """A hub that times argument checks and dispatches (two ``perf_counter`` calls each)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.check_s: list[float] = []
        self.dispatch_s: list[float] = []

    async def check(self, name: str, arguments: dict[str, Any]) -> ToolOutcome | None:
        """Time and forward."""
        started = time.perf_counter()
        try:
            return await super().check(name, arguments)
        finally:
            self.check_s.append(time.perf_counter() - started)

    async def dispatch(
        self, name: str, arguments: dict[str, Any], *, progress: ProgressFnT | None = None
    ) -> ToolOutcome:
        """Time and forward."""
        started = time.perf_counter()
        try:
            return await super().dispatch(name, arguments, progress=progress)
        finally:
            self.dispatch_s.append(time.perf_counter() - started)


# -- benchmarks -----------------------------------------------------------------------------------


async def measure_step(home: Path, repetitions: int, steps: int, raw_calls: int) -> Figure:
    """Median loop step against two raw in-memory calls, interleaved ``repetitions`` times."""
    step_s: list[float] = []
    mean_step_s: list[float] = []
    two_raw_s: list[float] = []
    appends_s: list[float] = []
    timing: TimingStore | None = None

    def wrap(store: Store) -> Store:
        nonlocal timing
        timing = TimingStore(store)
        return timing

    async with bench_rig(home, store_wrapper=wrap) as rig, Client(build_bench_server()) as raw:
        await rig.run(steps)  # warm-up
        await raw_call_times(raw, 50)
        assert timing is not None
        model: StampingModel | None = None
        for _ in range(repetitions):
            two_raw_s.append(2 * median(await raw_call_times(raw, raw_calls)))
            timing.append_s.clear()
            rig.hub.check_s.clear()
            rig.hub.dispatch_s.clear()
            model = await rig.run(steps)
            step_s.append(median(model.step_times()))
            mean_step_s.append(sum(model.step_times()) / steps)
            appends_s.extend(timing.append_s)
        assert model is not None
        breakdown = _breakdown(model, rig.hub, timing, steps)
    typical = median(appends_s)
    stalls = [a for a in appends_s if a > 10 * typical]
    stall_note = (
        f"event-log stalls: {len(stalls)} of {len(appends_s)} appends took over 10× the median {fmt_time(typical)}"
        + (f" (median stall {fmt_time(median(stalls))})" if stalls else "")
        + "; the store checkpoints the WAL in each run's run_finished append (one per run), the rest is other load"
    )
    ours, base = median(step_s), median(two_raw_s)
    ratio, spread = paired_ratio(step_s, two_raw_s)
    return Figure(
        key="loop_step",
        title="loop step: turn + bench__ping",
        measured=f"{fmt_time(ours)} vs 2 raw calls {fmt_time(base)}",
        ratio=ratio,
        target=STEP_TARGET,
        ratio_range=spread,
        notes=[
            f"median step of {repetitions} runs × {steps} steps, event log (checkpoints server, SQLite) included;"
            f" mean step (with stalls) {fmt_time(median(mean_step_s))}",
            "where a step goes (last run, medians): " + ", ".join(f"{k} {fmt_time(v)}" for k, v in breakdown.items()),
            stall_note,
        ],
        data={
            "step_s": step_s,
            "mean_step_s": mean_step_s,
            "two_raw_calls_s": two_raw_s,
            "breakdown_s": breakdown,
            "append_stalls_s": stalls,
            "appends": len(appends_s),
        },
    )


def _breakdown(model: StampingModel, hub: TimingHub, timing: TimingStore, steps: int) -> dict[str, float]:
    """Median time per step of each part of the last run's tool-calling steps."""
    parts = {
        "model turn": median(model.busy_s[:steps]),
        "hub.check": median(hub.check_s[:steps]),
        "hub.dispatch (MCP call)": median(hub.dispatch_s[:steps]),
    }
    # A run appends SessionCreated, then RunStarted+UserMessage, then two batches per tool step, then
    # the final answer with RunFinished (one batch): the per-step appends are the pairs in between. If the
    # loop ever batches differently, leave the event log out rather than mislabel it.
    if len(timing.append_s) == 2 * steps + 3:
        step_appends = timing.append_s[2 : 2 + 2 * steps]
        per_step = [a + b for a, b in zip(step_appends[::2], step_appends[1::2], strict=True)]
        parts["event log (2 appends)"] = median(per_step)
    parts["rest of the loop"] = max(0.0, median(model.step_times()) - sum(parts.values()))
    return parts


async def measure_runtime_step(home: Path, repetitions: int, steps: int, raw_calls: int) -> Figure:
    """The same step through ``embedded_runtime``/``open_session`` with ``fs__read`` of a tiny file."""
    from servers import fs

    cwd = home / "work"
    cwd.mkdir()
    (cwd / "tiny.txt").write_text("hello\n", encoding="utf-8")
    step_s: list[float] = []
    two_raw_s: list[float] = []
    async with embedded_runtime(home / "runtime") as runtime, Client(fs.build_server([cwd])) as raw:

        async def raw_reads(calls: int) -> list[float]:
            times: list[float] = []
            for _ in range(calls):
                started = time.perf_counter()
                result = await raw.call_tool("read", {"path": "tiny.txt"})
                times.append(time.perf_counter() - started)
                if result.is_error:
                    raise AssertionError(f"fs read failed: {result!r}")
            return times

        async def session_run() -> float:
            model = StampingModel(read_script(steps, "tiny.txt"))
            async with runtime.open_session(cwd, model) as session:
                result = await session.run("Benchmark the runtime.", max_steps=steps + 1)
                _check_run(session, steps, result.status, result.steps)
            return median(model.step_times())

        await session_run()  # warm-up
        await raw_reads(20)
        for _ in range(repetitions):
            two_raw_s.append(2 * median(await raw_reads(raw_calls)))
            step_s.append(await session_run())
    ours, base = median(step_s), median(two_raw_s)
    ratio, spread = paired_ratio(step_s, two_raw_s)
    return Figure(
        key="runtime_step",
        title="runtime step: turn + fs__read",
        measured=f"{fmt_time(ours)} vs 2 raw fs reads {fmt_time(base)}",
        ratio=ratio,
        target=None,
        ratio_range=spread,
        notes=["embedded_runtime + open_session (fs and shell attached), for reference; fs__read runs in a thread"],
        data={"step_s": step_s, "two_raw_reads_s": two_raw_s},
    )


async def measure_flatness(home: Path, runs: int) -> Figure:
    """Steps 181–200 against steps 1–20 of a 200-step run, over ``runs`` fresh sessions."""
    early_s: list[float] = []
    late_s: list[float] = []
    early_step: list[float] = []
    late_step: list[float] = []
    async with bench_rig(home) as rig:
        await rig.run(FLAT_STEPS)  # warm-up
        for _ in range(runs):
            times = (await rig.run(FLAT_STEPS)).step_times()
            if len(times) != FLAT_STEPS:
                raise AssertionError(f"expected {FLAT_STEPS} step times, got {len(times)}")
            early, late = times[:FLAT_WINDOW], times[-FLAT_WINDOW:]
            early_s.append(sum(early))
            late_s.append(sum(late))
            early_step.append(median(early))
            late_step.append(median(late))
    ours, base = median(late_s), median(early_s)
    ratio, spread = paired_ratio(late_s, early_s)
    return Figure(
        key="flatness",
        title=f"flatness: steps {FLAT_STEPS - FLAT_WINDOW + 1}–{FLAT_STEPS} vs 1–{FLAT_WINDOW}",
        measured=f"{fmt_time(ours)} vs {fmt_time(base)} per {FLAT_WINDOW} steps",
        ratio=ratio,
        target=FLATNESS_TARGET,
        ratio_range=spread,
        notes=[
            f"median over {runs} fresh {FLAT_STEPS}-step runs of each run's late/early window ratio;"
            f" spike-free view (median single step): early {fmt_time(median(early_step))},"
            f" late {fmt_time(median(late_step))}, ratio {paired_ratio(late_step, early_step)[0]:.2f}×"
        ],
        data={"early_window_s": early_s, "late_window_s": late_s},
    )
