"""What the store costs per step: round trips to the checkpoints server and SQLite transactions.

Issue 5's target: at most one store round trip and one SQLite transaction per step on the hot path,
where a step in the durable-seam sense is one model call or one tool call. The loop run is the real
one of :mod:`benchmarks.loop` (``CheckpointStore`` with the in-process checkpoints server, ``EventLog``,
``Hub``, ``Session``, a scripted model calling ``bench__ping``), in two shapes: one tool call per
model call, and three parallel calls per model call.

- **Round trips** are counted by a :class:`CountingStore` wrapped around the ``CheckpointStore``
  (delegation): every method call on the store is one MCP call to the checkpoints server.
- **Transactions** are counted from SQLite's own record, the WAL file: every write transaction
  ends with exactly one commit frame (a frame whose "database size after commit" field is not
  zero). :class:`WalCommits` reads the frames added since its last look after every append, so
  each append is charged the commits it caused. Read transactions write nothing and are not counted.

Batches holding ``run_started`` or ``run_finished`` are per run, not per step, and are reported
apart; every other store call during the run is charged to the steps.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks._report import Figure, fmt_time, median
from benchmarks.loop import bench_rig
from orchestrator.events import AssistantMessage, Event, SessionCreated, ToolCallFinished
from orchestrator.models.scripted import ScriptedModel
from orchestrator.runtime.runtime import Session, new_id
from orchestrator.store.interface import RunRecord, SessionRecord, SnapshotRecord, Store

TARGET = 1.0
"""At most one round trip per model call and per tool call, one SQLite transaction per step."""

_WAL_HEADER = 32
_FRAME_HEADER = 24


class WalCommits:
    """Counts commit frames appended to a SQLite WAL file, incrementally.

    A WAL restart (the first write after a complete checkpoint starts again at the top of the file with
    new salts) is noticed from the header's salts; frames of an older generation are not counted.
    """

    def __init__(self, wal: Path) -> None:
        self.wal = wal
        self.commits = 0
        self.frames = 0
        self._salts: bytes | None = None
        self._offset = _WAL_HEADER

    def poll(self) -> int:
        """Count the frames added since the last poll; returns the number of new commits."""
        try:
            data = self.wal.read_bytes()
        except FileNotFoundError:
            return 0
        if len(data) < _WAL_HEADER:
            return 0
        page_size = struct.unpack(">I", data[8:12])[0]
        salts = data[16:24]
        if salts != self._salts:
            self._salts, self._offset = salts, _WAL_HEADER
        new = 0
        frame = _FRAME_HEADER + page_size
        while self._offset + frame <= len(data):
            header = data[self._offset : self._offset + _FRAME_HEADER]
            if header[8:16] != salts:
                break  # a frame of an earlier generation: the end of this one
            self.frames += 1
            if struct.unpack(">I", header[4:8])[0] != 0:
                new += 1
            self._offset += frame
        self.commits += new
        return new


@dataclass
class Call:
    """One store call: its method, what its batch held, how long it took, the commits it caused."""

    method: str
    kinds: frozenset[str]
    seconds: float
    commits: int


@dataclass
class CountingStore:
    """A :class:`~orchestrator.store.interface.Store` that records every call to its inner store (delegation)."""

    inner: Store
    wal: WalCommits | None = None
    """Charge each call the WAL commits it caused (None: do not look)."""
    calls: list[Call] = field(default_factory=list[Call])

    def _record(self, method: str, started: float, kinds: frozenset[str] = frozenset()) -> None:
        seconds = time.perf_counter() - started
        self.calls.append(Call(method, kinds, seconds, self.wal.poll() if self.wal is not None else 0))

    async def append(self, events: Sequence[Event]) -> None:
        """Time, forward, count the commits."""
        started = time.perf_counter()
        await self.inner.append(events)
        self._record("append", started, frozenset(e.type for e in events))

    async def read_events(
        self,
        session_id: str,
        *,
        after_seq: int = 0,
        run_id: str | None = None,
        limit: int | None = None,
        before_seq: int | None = None,
    ) -> list[Event]:
        """Forward and count."""
        started = time.perf_counter()
        found = await self.inner.read_events(
            session_id, after_seq=after_seq, run_id=run_id, limit=limit, before_seq=before_seq
        )
        self._record("read_events", started)
        return found

    async def get_session(self, session_id: str) -> SessionRecord | None:
        """Forward and count."""
        started = time.perf_counter()
        found = await self.inner.get_session(session_id)
        self._record("get_session", started)
        return found

    async def list_sessions(self, *, include_archived: bool = False, limit: int = 100) -> list[SessionRecord]:
        """Forward and count."""
        started = time.perf_counter()
        found = await self.inner.list_sessions(include_archived=include_archived, limit=limit)
        self._record("list_sessions", started)
        return found

    async def set_session_title(self, session_id: str, title: str) -> bool:
        """Forward and count."""
        started = time.perf_counter()
        found = await self.inner.set_session_title(session_id, title)
        self._record("set_session_title", started)
        return found

    async def get_run(self, run_id: str) -> RunRecord | None:
        """Forward and count."""
        started = time.perf_counter()
        found = await self.inner.get_run(run_id)
        self._record("get_run", started)
        return found

    async def list_runs_with_status(self, status: str) -> list[RunRecord]:
        """Forward and count."""
        started = time.perf_counter()
        found = await self.inner.list_runs_with_status(status)
        self._record("list_runs_with_status", started)
        return found

    async def list_runs(self, session_id: str | None = None, limit: int = 50) -> list[RunRecord]:
        """Forward and count."""
        started = time.perf_counter()
        found = await self.inner.list_runs(session_id, limit)
        self._record("list_runs", started)
        return found

    async def snapshot_file(self, session_id: str, checkpoint: str, path: str, content: bytes | None) -> bool:
        """Forward and count."""
        started = time.perf_counter()
        found = await self.inner.snapshot_file(session_id, checkpoint, path, content)
        self._record("snapshot_file", started)
        return found

    async def list_snapshots(self, session_id: str) -> list[SnapshotRecord]:
        """Forward and count."""
        started = time.perf_counter()
        found = await self.inner.list_snapshots(session_id)
        self._record("list_snapshots", started)
        return found

    async def read_snapshot(self, session_id: str, checkpoint: str, path: str) -> tuple[bool, bytes | None] | None:
        """Forward and count."""
        started = time.perf_counter()
        found = await self.inner.read_snapshot(session_id, checkpoint, path)
        self._record("read_snapshot", started)
        return found

    async def read_context_events(self, session_id: str) -> list[Event]:
        """Forward and count."""
        started = time.perf_counter()
        found = await self.inner.read_context_events(session_id)
        self._record("read_context_events", started)
        return found

    async def find_tool_result(self, session_id: str, call_id: str) -> ToolCallFinished | None:
        """Forward and count."""
        started = time.perf_counter()
        found = await self.inner.find_tool_result(session_id, call_id)
        self._record("find_tool_result", started)
        return found


def parallel_script(steps: int, calls: int) -> ScriptedModel:
    """``steps`` turns that each make ``calls`` parallel ``bench__ping`` calls, then a final answer."""
    turns: list[dict[str, Any]] = [
        {
            "text": f"Step {i}: pinging {calls}×.",
            "tool_calls": [{"name": "bench__ping", "arguments": {"x": i * calls + k}} for k in range(calls)],
        }
        for i in range(steps)
    ]
    turns.append({"text": "Done."})
    return ScriptedModel.from_turns(turns)


@dataclass
class Tally:
    """One run's store calls, sorted into per-step and per-run ones."""

    model_calls: int = 0
    tool_calls: int = 0
    model_trips: int = 0
    """Store calls whose batch holds an assistant message (and the starts of its calls)."""
    tool_trips: int = 0
    """Store calls whose batch holds tool results and no assistant message."""
    other_trips: int = 0
    """Any other store call during the steps (none expected), charged to the steps too."""
    run_trips: int = 0
    """Store calls that start or finish the run (per run, not per step)."""
    step_commits: int = 0
    run_commits: int = 0
    max_commits_per_call: int = 0
    model_append_s: list[float] = field(default_factory=list[float])
    tool_append_s: list[float] = field(default_factory=list[float])

    @property
    def steps(self) -> int:
        """Model calls plus tool calls: the durable seam's steps."""
        return self.model_calls + self.tool_calls

    @property
    def step_trips(self) -> int:
        """Every store call charged to the steps."""
        return self.model_trips + self.tool_trips + self.other_trips


def tally(calls: Sequence[Call], history: Sequence[Event]) -> Tally:
    """Sort a run's store ``calls``; ``history`` (the run's stored events) gives the model and tool calls."""
    t = Tally()
    t.model_calls = sum(isinstance(e, AssistantMessage) for e in history)
    t.tool_calls = sum(isinstance(e, ToolCallFinished) for e in history)
    run_kinds = {"run_started", "run_finished"}
    for call in calls:
        t.max_commits_per_call = max(t.max_commits_per_call, call.commits)
        # A run reads its context from the store once, before its first step: a per-run cost like run_started.
        # The final answer is stored in one batch with run_finished: that call is the last model call's.
        if (call.kinds & run_kinds and "assistant_message" not in call.kinds) or call.method == "read_context_events":
            t.run_trips += 1
            t.run_commits += call.commits
            continue
        t.step_commits += call.commits
        if "assistant_message" in call.kinds:
            t.model_trips += 1
            t.model_append_s.append(call.seconds)
        elif "tool_call_finished" in call.kinds:
            t.tool_trips += 1
            t.tool_append_s.append(call.seconds)
        else:
            t.other_trips += 1
    return t


async def run_counted(home: Path, steps: int, calls_per_step: int) -> tuple[Tally, WalCommits]:
    """One fresh store and session; a run of ``steps`` model calls making ``calls_per_step`` pings each."""
    wal = WalCommits(home / "loom.db-wal")
    counting: CountingStore | None = None

    def wrap(store: Store) -> Store:
        nonlocal counting
        counting = CountingStore(store, wal)
        return counting

    async with bench_rig(home, store_wrapper=wrap) as rig:
        assert counting is not None
        model = parallel_script(steps, calls_per_step)
        session_id = new_id("s")
        await rig.log.append(SessionCreated(session_id=session_id, cwd=str(rig.cwd), model=model.name))
        session = Session(session_id, rig.cwd, model, rig.hub, rig.log)
        wal.poll()
        counting.calls.clear()
        result = await session.run("Count the store's work.", max_steps=steps + 1)
        if result.status != "completed" or result.steps != steps + 1:
            raise AssertionError(f"store benchmark run ended {result.status} after {result.steps} steps")
        calls = list(counting.calls)
        events = await counting.inner.read_events(session_id)
    t = tally(calls, events)
    if t.model_calls != steps + 1 or t.tool_calls != steps * calls_per_step:
        raise AssertionError(f"expected {steps + 1} model calls and {steps * calls_per_step} tool calls, got {t}")
    errors = [e for e in events if isinstance(e, ToolCallFinished) and e.is_error]
    if errors:
        raise AssertionError(f"{len(errors)} tool calls failed, e.g. {errors[0].content}")
    return t, wal


async def measure(home: Path, repetitions: int, steps: int) -> list[Figure]:
    """Round trips per model call and per tool call, and SQLite transactions per step (three figures)."""
    shapes = (1, 3)
    tallies: dict[int, list[Tally]] = {n: [] for n in shapes}
    frames_per_commit: list[float] = []
    (home / "warm-up").mkdir()
    await run_counted(home / "warm-up", min(steps, 20), 1)
    for rep in range(repetitions):
        for n in shapes:
            run_home = home / f"{rep}-{n}"
            run_home.mkdir()
            t, wal = await run_counted(run_home, steps, n)
            tallies[n].append(t)
            if wal.commits:
                frames_per_commit.append(wal.frames / wal.commits)
    # Counts do not vary between repetitions (checked); times are pooled.
    for n in shapes:
        keys = {(t.model_trips, t.tool_trips, t.other_trips, t.step_commits) for t in tallies[n]}
        if len(keys) != 1:
            raise AssertionError(f"store counts varied between repetitions of the {n}-call run: {keys}")
    last = {n: tallies[n][-1] for n in shapes}
    model_append = median([s for n in shapes for t in tallies[n] for s in t.model_append_s])
    tool_append = median([s for n in shapes for t in tallies[n] for s in t.tool_append_s])
    all_append = median([s for n in shapes for t in tallies[n] for s in (*t.model_append_s, *t.tool_append_s)])
    per_model = {n: (last[n].model_trips + last[n].other_trips) / last[n].model_calls for n in shapes}
    per_tool = {n: last[n].tool_trips / last[n].tool_calls for n in shapes}
    per_step = {n: last[n].step_commits / last[n].steps for n in shapes}
    trips_per_step = {n: last[n].step_trips / last[n].steps for n in shapes}

    def shape(n: int) -> str:
        return f"{steps}×{n} call{'s' if n > 1 else ''}"

    data = {
        "steps": steps,
        "repetitions": repetitions,
        "runs": {str(n): [vars(t) | {"steps_total": t.steps} for t in tallies[n]] for n in shapes},
        "median_append_s": all_append,
        "median_model_append_s": model_append,
        "median_tool_append_s": tool_append,
        "wal_frames_per_commit": median(frames_per_commit) if frames_per_commit else None,
    }
    one, three = last[1], last[3]
    notes_common = [
        f"real loop run, CheckpointStore + in-process checkpoints server; {repetitions} × 2 runs of {steps} model"
        f" calls making 1 or 3 parallel bench__ping calls each, plus a final answer; counts identical in every run",
        f"per run on top: {one.run_trips} store calls, {one.run_commits} transactions (run_started + user message,"
        " the read of the context the run starts from; run_finished rides with the final answer); not charged"
        " to steps",
    ]
    trips_figure = Figure(
        key="store_trips_per_model_call",
        title="store round trips per model call",
        measured=f"{one.model_trips + one.other_trips} / {one.model_calls} ({shape(1)}),"
        f" {three.model_trips + three.other_trips} / {three.model_calls} ({shape(3)})",
        ratio=max(per_model.values()),
        target=TARGET,
        notes=[
            *notes_common,
            f"one append_events per model call (assistant message + starts of its calls, one batch); median"
            f" append {fmt_time(model_append)} (model-call batch), {fmt_time(tool_append)} (tool result),"
            f" {fmt_time(all_append)} overall",
        ],
        data=data,
    )
    tool_figure = Figure(
        key="store_trips_per_tool_call",
        title="store round trips per tool call",
        measured=f"{one.tool_trips} / {one.tool_calls} ({shape(1)}), {three.tool_trips} / {three.tool_calls}"
        f" ({shape(3)})",
        ratio=max(per_tool.values()),
        target=TARGET,
        notes=[
            "one append_events per tool result, as it arrives (parallel calls are not batched);"
            f" all store calls per step: {trips_per_step[1]:.2f} ({shape(1)}), {trips_per_step[3]:.2f} ({shape(3)});"
            f" store time per model call + its tool call ≈ {fmt_time(model_append + tool_append)}"
        ],
    )
    frames = f"{data['wal_frames_per_commit']:.1f}" if frames_per_commit else "?"
    txn_figure = Figure(
        key="store_transactions_per_step",
        title="SQLite transactions per step",
        measured=f"{one.step_commits} / {one.steps} ({shape(1)}), {three.step_commits} / {three.steps} ({shape(3)})",
        ratio=max(per_step.values()),
        target=TARGET,
        notes=[
            "write transactions = commit frames in the WAL file, read after every append; step = model call or tool"
            f" call; at most {max(t.max_commits_per_call for ts in tallies.values() for t in ts)} per store call;"
            f" {frames} WAL frames (4 KiB pages) per commit",
        ],
    )
    return [trips_figure, tool_figure, txn_figure]
