"""Crash test (issue 5): SIGKILL the daemon at random points of runs that mix tool kinds, resume, check.

Each run plays a plan of model turns (generated from a seed) whose tool calls mix read-only
(``counter__read_state``), idempotent (``counter__put``) and side-effecting (``counter__append_entry``)
tools of :mod:`tests.durability.counting_server`, which fsyncs one line per execution before it does
anything else. Every call carries a unique ``key``. Clients long-poll ``read_events`` while runs go;
what they receive is what the daemon acknowledged. The daemon process alone gets SIGKILL at a random
moment (seeded; the seed is in every assertion message): mostly a random fraction of the way through
the run once it is under way (model turns, tool calls, store writes, reviews), sometimes a random
time after the restart (while sessions reopen and runs resume). Then, with the daemon dead:

* its stdio children (the counting server) must exit on their own (EOF), bounded;
* a copy of ``loom.db`` (and its WAL) must pass ``PRAGMA integrity_check``;
* no side-effecting key may appear twice in the execution file;

and once a new daemon is up (which must start despite the stale lock and discovery file):

* every event a client received before the kill is stored, identical, at the same seq, and each
  ``assistant_message`` is followed by the ``tool_call_started`` of all its calls (one batch, atomic);
* every execution has a stored ``tool_call_started`` with its key (intent is durable before the
  effect), and every successful stored ``tool_call_finished`` has an execution behind it;
* ``run_resumed`` re-runs only read-only/idempotent calls and sends only side-effecting ones to review;
* the killed run is ``interrupted``/``needs_review`` (or ``completed``) and is continued with
  ``resume_run``; every review is denied (the call may have run, so it must not run again).

A run that completes must end ``completed`` with its final text; each of its read-only and idempotent
calls executed at least once; each side-effecting call exactly once, or, if a review skipped it, no
more often than when it was denied (0 or 1). Then the next run starts, in a new session.

The model is a fake Anthropic API whose answer depends only on the conversation it is sent (which
turn of the plan comes next is the number of assistant messages since the run's prompt), like a
real model and unlike ``scripted:`` models, which restart their script when a session is reopened.
The first run is not killed: it measures how long opening a session and a run take (kill delays
are drawn within that) and checks that every call of an undisturbed run executes exactly once.

Default mode does a handful of kills (about a minute); long mode (``pytest --long`` or
``LOOM_LONG_TESTS=1``) at least 50. ``LOOM_CRASH_SEED=N`` replays a seed's plans and kill times
(timing still varies), ``LOOM_CRASH_KILLS=N`` sets the number of kills. The summary line (``-s``)
gives kills, cycle times, where the kills landed, resumes and denied reviews.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import TaskGroup
from mcp import Client
from starlette.requests import Request

from orchestrator.home import DB_NAME
from tests.clients.cli_support import REPO_ROOT, clean_env, loom_command, processes_matching
from tests.durability.counting_server import RECORD_ENV, executions
from tests.orchestrator.daemon.daemon_process import START_TIMEOUT_S, Daemon, mcp_client
from tests.orchestrator.models.fake_anthropic import FakeAnthropic
from tests.orchestrator.models.fake_common import Action, RecordedRequest, Reply, Text, ToolCall, text_reply
from tests.orchestrator.models.live_server import serve

COUNTING_SERVER = Path(__file__).resolve().parent / "counting_server.py"
PROMPT = "crash run "
MODEL = "anthropic:crash-fake"
CLIENT_MODE = "auto"

DEFAULT_KILLS = 4
LONG_KILLS = 50
ANYWHERE = 0.2
"""The share of kills timed from the restart rather than from the moment the run is under way."""
CHILD_EXIT_TIMEOUT_S = 10.0
CYCLE_TIMEOUT_S = 60.0
"""Bound for one kill cycle: restart, checks, drive, kill."""

pytestmark = pytest.mark.anyio

SIDE_EFFECTING = "append_entry"
TOOLS = ("read_state", "put", SIDE_EFFECTING)


def long_mode(config: pytest.Config) -> bool:
    return bool(config.getoption("--long")) or os.environ.get("LOOM_LONG_TESTS") == "1"


# -- the model -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    """One planned model answer: its thinking time and its calls as (tool, key, delay_s)."""

    delay_s: float
    calls: tuple[tuple[str, str, float], ...]


def planned_s(turns: list[Turn]) -> float:
    """What a plan waits for in all (model thinking plus the longest call of each turn)."""
    return sum(t.delay_s + max(d for _, _, d in t.calls) for t in turns)


def plan(seed: int, label: str) -> list[Turn]:
    """The turns of run ``label``: 4-6 turns of 1-3 calls, each with a short hold to widen kill windows."""
    rng = random.Random(f"{seed}:{label}")
    turns = []
    for step in range(rng.randint(4, 6)):
        calls = tuple(
            (rng.choice(TOOLS), f"{label}.{step}.{k}", round(rng.uniform(0.0, 0.25), 3))
            for k in range(rng.randint(1, 3))
        )
        turns.append(Turn(round(rng.uniform(0.02, 0.2), 3), calls))
    return turns


class PlannedModel(FakeAnthropic):
    """A fake Anthropic API answering from the conversation alone: turn *n* of the run's plan after *n* answers."""

    def __init__(self, seed: int) -> None:
        super().__init__()
        self.seed = seed

    async def record(self, request: Request) -> tuple[RecordedRequest, Action | None]:
        body: Any = json.loads(await request.body())
        recorded = RecordedRequest(request.method, request.url.path, {}, body)
        return recorded, self.answer(body.get("messages", []))

    def answer(self, messages: list[dict[str, Any]]) -> Action:
        label, answered = None, 0
        for message in messages:
            text = _text_of(message)
            if message.get("role") == "user" and text.startswith(PROMPT):
                label, answered = text.removeprefix(PROMPT).split()[0], 0
            elif message.get("role") == "assistant":
                answered += 1
        if label is None:
            return text_reply("no plan for this conversation")
        turns = plan(self.seed, label)
        if answered >= len(turns):
            return text_reply(f"done {label}")
        turn = turns[answered]
        calls = [
            ToolCall(
                f"counter__{tool}",
                {"key": key, "delay_s": delay, **({"value": "v"} if tool == "put" else {})}
                | ({"text": f"entry {key}"} if tool == SIDE_EFFECTING else {}),
                id=f"toolu_{key.replace('.', '_')}",
            )
            for tool, key, delay in turn.calls
        ]
        return Reply([Text(f"step {answered} of {label}"), *calls], delay_s=turn.delay_s, chunk_size=64)


def _text_of(message: dict[str, Any]) -> str:
    """The first text block (a resume note may follow the prompt in the same message)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    texts = [b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text"]
    return texts[0] if texts else ""


@contextlib.contextmanager
def serve_planned_model(seed: int) -> Iterator[PlannedModel]:
    fake = PlannedModel(seed)
    with serve(fake.app) as origin:
        fake.base_url = origin
        yield fake


# -- the daemon ----------------------------------------------------------------------------------------


def launch(home: Path, cwd: Path, env: dict[str, str], log_name: str) -> Daemon:
    """``loom serve --port 0`` with ``env`` added (``start_daemon`` strips ANTHROPIC_*, which the fake model needs)."""
    stderr_path = cwd / f"{log_name}.stderr"
    err = stderr_path.open("wb")
    proc = subprocess.Popen(
        [*loom_command(), "serve", "--port", "0"],
        cwd=cwd,
        env=clean_env(home, env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=err,
    )
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            found: dict[str, Any] = json.loads((home / "daemon.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            found = {}
        if found.get("pid") == proc.pid:
            return Daemon(proc, home, found["url"], (home / "daemon.token").read_text().strip(), stderr_path, err)
        if proc.poll() is not None or time.monotonic() > deadline:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=5)
            err.close()
            raise AssertionError(
                f"loom serve did not come up (exit {proc.returncode}):\n{stderr_path.read_text(errors='replace')}"
            )
        time.sleep(0.05)


def sigkill(daemon: Daemon) -> None:
    """SIGKILL the daemon process (not its children) and reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(daemon.proc.pid, signal.SIGKILL)
    daemon.proc.wait(timeout=10)
    daemon._stderr.close()


def living(marker: str) -> dict[int, str]:
    return {pid: state for pid, state in processes_matching(marker).items() if state not in ("Z", "X")}


def wait_children_gone(marker: str, where: str) -> None:
    """The killed daemon's stdio servers must see EOF and exit; kill and fail if they do not."""
    deadline = time.monotonic() + CHILD_EXIT_TIMEOUT_S
    while (left := living(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert not left, f"{where}: child processes outlived the daemon by {CHILD_EXIT_TIMEOUT_S} s: {left}"


def integrity(home: Path, scratch: Path, where: str) -> None:
    """``PRAGMA integrity_check`` on a copy of the database and its WAL (so the next daemon recovers the real one)."""
    db = home / DB_NAME
    assert db.is_file(), f"{where}: no database at {db}"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    for suffix in ("", "-wal"):
        if (home / f"{DB_NAME}{suffix}").exists():
            shutil.copyfile(home / f"{DB_NAME}{suffix}", scratch / f"{DB_NAME}{suffix}")
    conn = sqlite3.connect(scratch / DB_NAME)
    try:
        result = conn.execute("PRAGMA integrity_check").fetchall()
    finally:
        conn.close()
    assert result == [("ok",)], f"{where}: integrity_check says {result}"


# -- the client side -----------------------------------------------------------------------------------


async def call(client: Client, tool: str, where: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, f"{where}: {tool} {arguments} failed: {result.content}"
    content: dict[str, Any] | None = result.structured_content
    assert content is not None, f"{where}: {tool} returned no structured content"
    return content


async def stored_events(client: Client, session_id: str, where: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    cursor = 0
    while True:
        page = await call(client, "read_events", where, session_id=session_id, after_seq=cursor, limit=1000)
        if not page["events"]:
            return events
        events.extend(page["events"])
        cursor = page["next_after_seq"]


@dataclass
class Acked:
    """Events a client received, per session and seq; a second receipt must be identical."""

    events: dict[str, dict[int, dict[str, Any]]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def take(self, session_id: str, event: dict[str, Any], where: str) -> None:
        seen = self.events.setdefault(session_id, {})
        seq = event["seq"]
        if seq in seen and seen[seq] != event:
            self.problems.append(f"{where}: event {session_id}#{seq} changed: {seen[seq]} -> {event}")
        seen[seq] = event


async def follow(daemon: Daemon, session_id: str, acked: Acked, where: str) -> None:
    """Long-poll read_events from the start until the daemon goes away, recording what it acknowledged."""
    with contextlib.suppress(Exception):  # the kill ends this however the transport reports it
        async with mcp_client(daemon, CLIENT_MODE) as client:
            cursor = 0
            while True:
                result = await client.call_tool(
                    "read_events", {"session_id": session_id, "after_seq": cursor, "wait_s": 5}
                )
                page = result.structured_content
                if result.is_error or page is None:
                    acked.problems.append(f"{where}: read_events failed: {result.content}")
                    return
                for event in page["events"]:
                    acked.take(session_id, event, where)
                cursor = page["next_after_seq"]


# -- the test ------------------------------------------------------------------------------------------


@dataclass
class RunState:
    """One planned run, driven across as many kills as it takes to complete."""

    session_id: str
    label: str
    run_id: str | None = None
    denied: dict[str, int] = field(default_factory=dict)
    """Side-effecting keys a review skipped, with how often each had executed when it was denied."""
    resumes: int = 0

    def tools(self, seed: int) -> dict[str, str]:
        """Each planned key's tool."""
        return {key: tool for turn in plan(seed, self.label) for tool, key, _ in turn.calls}


@dataclass
class CrashTest:
    root: Path
    seed: int
    env: dict[str, str]
    rng: random.Random = field(init=False)
    home: Path = field(init=False)
    project: Path = field(init=False)
    record_file: Path = field(init=False)
    acked: Acked = field(default_factory=Acked)
    runs: list[RunState] = field(default_factory=list)
    current: RunState | None = None
    kills: int = 0
    completed: int = 0
    reviews_denied: int = 0
    cycle_s: list[float] = field(default_factory=list)
    run_s: float = 0.0
    open_s: float = 0.0
    """How long creating (or reopening) a session takes: its stdio server starts."""
    overhead_s: float = 0.0
    """What a run takes beyond its planned waits (measured by the undisturbed run)."""
    landed: dict[str, int] = field(default_factory=dict)
    phase: str = "starting"
    """What the driver is doing (for where a kill landed)."""
    killed_while: str = ""
    going: anyio.Event = field(default_factory=anyio.Event)
    remaining_s: float = 0.0

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.home = self.root / "home"
        self.project = self.root / "project"
        self.project.mkdir(parents=True)
        self.record_file = self.root / "executions.jsonl"
        self.home.mkdir(mode=0o700)
        server = {
            "command": sys.executable,
            "args": [str(COUNTING_SERVER), self.marker],
            "env": {"PYTHONPATH": str(REPO_ROOT), RECORD_ENV: str(self.record_file)},
        }
        (self.home / "config.json").write_text(json.dumps({"mcpServers": {"counter": server}}), encoding="utf-8")

    @property
    def marker(self) -> str:
        return f"--marker={self.root}"

    def where(self, step: str) -> str:
        return f"seed={self.seed} kill#{self.kills + 1} {step}"

    def start(self, name: str) -> Daemon:
        return launch(self.home, self.root, self.env, name)

    # -- driving

    async def new_run(self, client: Client, daemon: Daemon, tg: TaskGroup, where: str) -> RunState:
        self.phase = "creating a session"
        session = await call(client, "create_session", where, cwd=str(self.project), model=MODEL, mode="bypass")
        state = RunState(session["session_id"], f"r{len(self.runs)}")
        self.runs.append(state)
        self.current = state
        tg.start_soon(follow, daemon, state.session_id, self.acked, where)
        self.phase = "starting a run"
        run = await call(client, "send_message", where, session_id=state.session_id, text=PROMPT + state.label)
        state.run_id = run["run_id"]
        self.going_for(plan(self.seed, state.label))
        return state

    def going_for(self, turns: list[Turn]) -> None:
        """The run is under way with ``turns`` to go: the moment the kill timer of a cycle waits for."""
        self.phase = "running"
        self.remaining_s = planned_s(turns) + self.overhead_s
        self.going.set()

    async def drive(self, client: Client, daemon: Daemon, tg: TaskGroup, where: str, *, until: float) -> None:
        """Drive the current run (or new ones), denying every review; return once a run completes after ``until``."""
        while True:
            state = self.current or await self.new_run(client, daemon, tg, where)
            assert state.run_id is not None
            run = await call(client, "get_run", where, run_id=state.run_id, wait_s=10.0)
            if run["status"] == "needs_review":
                await self.deny_reviews(client, state, where)
            elif run["status"] == "completed":
                await self.finish_run(client, state, where)
                if anyio.current_time() >= until:
                    return
            else:
                assert run["status"] in ("running", "queued"), f"{where}: run {state.label} is {run}"

    async def deny_reviews(self, client: Client, state: RunState, where: str) -> None:
        """Skip every call the resumed run asks about: it may have run, so it must not run again."""
        pending = (await call(client, "list_approvals", where, session_id=state.session_id))["approvals"]
        counts = self.counts()
        tools = state.tools(self.seed)
        for approval in pending:
            assert approval["kind"] == "review", f"{where}: a bypass run asked {approval}"
            key = approval["arguments"]["key"]
            assert tools.get(key) == SIDE_EFFECTING, f"{where}: review of a call that may be repeated: {approval}"
            state.denied[key] = counts.get(key, 0)
            self.reviews_denied += 1
            await call(client, "decide_approval", where, approval_id=approval["approval_id"], decision="deny")

    async def resume(self, client: Client, daemon: Daemon, tg: TaskGroup, where: str) -> None:
        """After a restart: see where the killed run stands and resume it (or give it up if it never started)."""
        state = self.current
        if state is None:
            if self.kills:
                self.land(f"while {self.killed_while}")
            return
        tg.start_soon(follow, daemon, state.session_id, self.acked, where)
        events = await stored_events(client, state.session_id, where)
        started = [e["run_id"] for e in events if e["type"] == "run_started"]
        if state.run_id is None and started:  # killed while send_message was answering
            state.run_id = started[-1]
        if state.run_id is None or state.run_id not in started:
            acked = [e for e in self.acked.events.get(state.session_id, {}).values() if e.get("run_id")]
            assert not acked, f"{where}: run of {state.label} is unknown after restart, yet events were acked: {acked}"
            self.land("before run_started was stored")
            self.current = None
            return
        run = await call(client, "get_run", where, run_id=state.run_id)
        mine = [e for e in events if e.get("run_id") == state.run_id]
        if run["status"] != "completed":
            assert (mine[-1]["type"], mine[-1].get("status")) == ("run_finished", "interrupted"), (
                f"{where}: the restart did not mark the killed run interrupted: {mine[-3:]}"
            )
        self.land(_kill_point(run["status"], mine) if self.killed_while == "running" else f"while {self.killed_while}")
        if run["status"] == "completed":
            await self.finish_run(client, state, where)
            return
        assert run["status"] in ("interrupted", "needs_review"), f"{where}: killed run is {run}"
        self.phase = "resuming (reopening the session)"
        await call(client, "resume_run", where, run_id=state.run_id)
        state.resumes += 1
        self.going_for(plan(self.seed, state.label)[sum(e["type"] == "assistant_message" for e in mine) :])

    def land(self, point: str) -> None:
        self.landed[point] = self.landed.get(point, 0) + 1

    # -- checks

    def counts(self) -> dict[str, int]:
        found: dict[str, int] = {}
        for e in executions(self.record_file):
            found[e["key"]] = found.get(e["key"], 0) + 1
        return found

    def check_executions(self, where: str) -> dict[str, int]:
        counts = self.counts()
        tools = {key: tool for state in self.runs for key, tool in state.tools(self.seed).items()}
        twice = sorted(k for k, n in counts.items() if n > 1 and tools.get(k) == SIDE_EFFECTING)
        assert not twice, f"{where}: side-effecting calls executed more than once: {twice}"
        unplanned = sorted(set(counts) - set(tools))
        assert not unplanned, f"{where}: executions nobody planned: {unplanned}"
        return counts

    async def check_store(self, client: Client, where: str) -> None:
        """After a restart: acknowledged events intact, executions and stored calls consistent."""
        assert not self.acked.problems, "\n".join(self.acked.problems)
        counts = self.check_executions(where)
        started_keys: set[str] = set()
        finished_ok: set[str] = set()
        for state in self.runs:
            stored = {e["seq"]: e for e in await stored_events(client, state.session_id, where)}
            assert sorted(stored) == list(range(1, len(stored) + 1)), f"{where}: seqs of {state.session_id} have gaps"
            for seq, event in self.acked.events.get(state.session_id, {}).items():
                assert stored.get(seq) == event, (
                    f"{where}: acknowledged event {state.session_id}#{seq} is {stored.get(seq)} after restart, "
                    f"was {event}"
                )
            tools = state.tools(self.seed)
            ordered = [stored[seq] for seq in sorted(stored)]
            for i, event in enumerate(ordered):
                if event["type"] == "assistant_message":
                    # One store batch: the answer and the calls it starts (bypass: no call waits or is refused).
                    uses = [b["id"] for b in event["message"]["content"] if b["type"] == "tool_use"]
                    # The context watermark is part of that batch, between the answer and its starts.
                    after = [e for e in ordered[i + 1 : i + 2 + len(uses)] if e["type"] != "context_watermark"]
                    batch = [e.get("call_id") for e in after[: len(uses)]]
                    assert batch == uses, (
                        f"{where}: seq {event['seq']} of {state.session_id} is not stored with its starts"
                    )
            for event in stored.values():
                if event["type"] == "tool_call_started":
                    started_keys.add(event["arguments"]["key"])
                elif event["type"] == "tool_call_finished" and not event["is_error"]:
                    finished_ok.add(_key_of(event["call_id"]))
                elif event["type"] == "run_resumed":
                    rerun = {tools[_key_of(c)] for c in event["rerun"]}
                    review = {tools[_key_of(c)] for c in event["review"]}
                    assert SIDE_EFFECTING not in rerun, f"{where}: a side-effecting call was re-run: {event}"
                    assert review <= {SIDE_EFFECTING}, f"{where}: a harmless call was sent to review: {event}"
        unrecorded = sorted(set(counts) - started_keys)
        assert not unrecorded, f"{where}: calls executed without a stored tool_call_started: {unrecorded}"
        phantom = sorted(finished_ok - set(counts))
        assert not phantom, f"{where}: stored as finished but never executed: {phantom}"

    async def finish_run(self, client: Client, state: RunState, where: str) -> None:
        """A completed run: every harmless call ran, every side effect exactly once unless a review skipped it."""
        assert state.run_id is not None
        run = await call(client, "get_run", where, run_id=state.run_id)
        assert (run["status"], run["final_text"]) == ("completed", f"done {state.label}"), f"{where}: {run}"
        counts = self.check_executions(where)
        for key, tool in state.tools(self.seed).items():
            n = counts.get(key, 0)
            if tool != SIDE_EFFECTING:
                assert n >= 1, f"{where}: {tool} {key} of completed run {state.label} never executed"
            elif key in state.denied:
                assert n == state.denied[key], f"{where}: {key} ran after its review was denied ({counts})"
            else:
                assert n == 1, f"{where}: side-effecting {key} of completed run {state.label} executed {n} times"
        self.completed += 1
        self.current = None

    # -- the phases

    async def calibrate(self) -> None:
        """One undisturbed run: it completes, every call executes exactly once; its length bounds kill delays."""
        where = f"seed={self.seed} calibration"
        daemon = self.start("calibration")
        try:
            with anyio.fail_after(CYCLE_TIMEOUT_S):
                async with anyio.create_task_group() as tg:
                    async with mcp_client(daemon, CLIENT_MODE) as client:
                        started = anyio.current_time()
                        state = await self.new_run(client, daemon, tg, where)
                        self.open_s = anyio.current_time() - started
                        await self.drive(client, daemon, tg, where, until=0.0)
                        self.run_s = anyio.current_time() - started - self.open_s
                        self.overhead_s = max(0.0, self.run_s - planned_s(plan(self.seed, state.label)))
                        await anyio.sleep(0.3)  # let the follower catch up before checking what it got
                        await self.check_store(client, where)
                        assert all(n == 1 for n in self.counts().values()), f"{where}: {self.counts()}"
                        tg.cancel_scope.cancel()  # the follower
        finally:
            code = daemon.stop()
        assert code == 0, f"{where}: the daemon exited {code} on SIGTERM:\n{daemon.stderr()}"
        wait_children_gone(self.marker, where)
        integrity(self.home, self.root / "check", where)

    async def cycle(self) -> None:
        """Restart, check what the last kill left, resume, SIGKILL the daemon at a random moment."""
        started = time.monotonic()
        label = self.current.label if self.current else f"r{len(self.runs)}"
        # Mostly within the run once it is under way; sometimes anywhere (restart, reopening, resuming).
        anywhere = self.rng.random() < ANYWHERE
        early = self.rng.uniform(0.0, self.open_s + planned_s(plan(self.seed, label)) + self.overhead_s)
        fraction = self.rng.uniform(0.0, 1.05)
        when = f"{early:.3f} s after the restart" if anywhere else f"{fraction:.3f} of the way through the run"
        where = self.where(f"(run {label}, SIGKILL {when})")
        self.going = anyio.Event()
        self.phase = "starting"
        daemon = self.start(f"daemon{self.kills}")
        killed = False
        try:
            with anyio.fail_after(CYCLE_TIMEOUT_S):
                async with anyio.create_task_group() as tg:
                    async with mcp_client(daemon, CLIENT_MODE) as client:
                        await self.check_store(client, where + " after restart")

                    async def driver() -> None:
                        try:
                            async with mcp_client(daemon, CLIENT_MODE) as client:
                                await self.resume(client, daemon, tg, where + " resuming")
                                await self.drive(client, daemon, tg, where, until=math.inf)
                        except Exception:
                            if not killed:
                                raise

                    tg.start_soon(driver)
                    if anywhere:
                        await anyio.sleep(early)
                    else:
                        await self.going.wait()
                        await anyio.sleep(fraction * self.remaining_s)
                    killed = True
                    self.killed_while = self.phase
                    sigkill(daemon)
                    tg.cancel_scope.cancel()  # the driver and the followers, whose calls now fail anyway
        finally:
            if daemon.proc.poll() is None:
                sigkill(daemon)
        self.kills += 1
        wait_children_gone(self.marker, where)
        integrity(self.home, self.root / "check", where)
        self.check_executions(where)
        self.cycle_s.append(time.monotonic() - started)

    async def final(self) -> None:
        """Restart once more, run the last killed run to completion, stop cleanly."""
        where = self.where("final")
        daemon = self.start("final")
        try:
            with anyio.fail_after(CYCLE_TIMEOUT_S):
                async with anyio.create_task_group() as tg:
                    async with mcp_client(daemon, CLIENT_MODE) as client:
                        await self.check_store(client, where)
                        await self.resume(client, daemon, tg, where)
                        if self.current is not None:
                            await self.drive(client, daemon, tg, where, until=0.0)
                        await anyio.sleep(0.3)
                        await self.check_store(client, where)
                        tg.cancel_scope.cancel()
        finally:
            code = daemon.stop()
        assert code == 0, f"{where}: the last daemon exited {code} on SIGTERM:\n{daemon.stderr()}"
        wait_children_gone(self.marker, where)
        integrity(self.home, self.root / "check", where)

    def summary(self) -> str:
        cycles = self.cycle_s or [0.0]
        acked = sum(len(s) for s in self.acked.events.values())
        return (
            f"seed={self.seed}: {self.kills} kills; session open {self.open_s:.2f} s, undisturbed run "
            f"{self.run_s:.2f} s; kill cycle mean {sum(cycles) / len(cycles):.2f} s, max {max(cycles):.2f} s; "
            f"kills landed {dict(sorted(self.landed.items()))}; {self.completed} runs completed, "
            f"{sum(s.resumes for s in self.runs)} resumes, {self.reviews_denied} reviews denied; "
            f"{len(executions(self.record_file))} executions, {acked} acknowledged events"
        )


def _kill_point(status: str, run_events: list[dict[str, Any]]) -> str:
    """Where a kill landed, judged from what the killed run had stored."""
    if status == "completed":
        return "after the run"
    asked = {e["approval_id"] for e in run_events if e["type"] == "approval_requested"}
    decided = {e["approval_id"] for e in run_events if e["type"] == "approval_decided"}
    if asked - decided:
        return "awaiting a review"
    started = {e["call_id"] for e in run_events if e["type"] == "tool_call_started"}
    finished = {e["call_id"] for e in run_events if e["type"] == "tool_call_finished"}
    return "during tool calls" if started - finished else "during a model turn"


def _key_of(call_id: str) -> str:
    """The key a planned call id carries (``toolu_r3_2_1`` -> ``r3.2.1``)."""
    return call_id.removeprefix("toolu_").replace("_", ".")


async def run_crash_test(tmp_path: Path, kills: int) -> None:
    seed = int(os.environ.get("LOOM_CRASH_SEED") or random.SystemRandom().randrange(1 << 32))
    with serve_planned_model(seed) as model:
        test = CrashTest(tmp_path, seed, {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": model.base_url})
        try:
            await test.calibrate()
            while test.kills < kills:
                await test.cycle()
            await test.final()
        finally:
            for pid in living(test.marker):  # whatever a failure left behind
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            print(test.summary())


@pytest.mark.timeout(240)
async def test_sigkill_at_random_points_loses_no_acknowledged_event_and_repeats_no_effect(tmp_path: Path) -> None:
    await run_crash_test(tmp_path, int(os.environ.get("LOOM_CRASH_KILLS") or DEFAULT_KILLS))


@pytest.mark.slow
@pytest.mark.timeout(3600)
async def test_long_mode_many_kills(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    if not long_mode(request.config):
        pytest.skip("long mode only: pytest --long, or LOOM_LONG_TESTS=1")
    await run_crash_test(tmp_path, max(LONG_KILLS, int(os.environ.get("LOOM_CRASH_KILLS") or 0)))


async def _wait_for(daemon: Daemon, session_id: str, what: str, count: int, timeout_s: float) -> list[dict[str, Any]]:
    """Poll the session's events until ``count`` of type ``what`` are stored (bounded); return them all."""
    with anyio.move_on_after(timeout_s):
        async with mcp_client(daemon, CLIENT_MODE) as client:
            while True:
                events = await stored_events(client, session_id, what)
                if sum(e["type"] == what for e in events) >= count:
                    return events
                await anyio.sleep(0.05)
    raise AssertionError(f"no {count}th {what} in session {session_id} within {timeout_s} s")


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_a_run_killed_while_resumed_is_marked_and_auto_resumed_again(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if not long_mode(request.config):
        pytest.skip("long mode only: pytest --long, or LOOM_LONG_TESTS=1")
    with serve_planned_model(7) as model:
        test = CrashTest(tmp_path, 7, {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": model.base_url})
        config = json.loads((test.home / "config.json").read_text(encoding="utf-8"))
        (test.home / "config.json").write_text(json.dumps({**config, "autoResume": True}), encoding="utf-8")
        try:
            first = test.start("first")
            async with mcp_client(first, CLIENT_MODE) as client:
                session = await call(client, "create_session", "", cwd=str(test.project), model=MODEL, mode="bypass")
                await call(client, "send_message", "", session_id=session["session_id"], text=PROMPT + "r0")
            await _wait_for(first, session["session_id"], "tool_call_started", 1, 30)
            sigkill(first)  # mid-run: the restart marks it interrupted and autoResume resumes it
            wait_children_gone(test.marker, "first kill")
            second = test.start("second")
            await _wait_for(second, session["session_id"], "run_resumed", 1, 30)
            sigkill(second)  # while the resumed run goes
            wait_children_gone(test.marker, "second kill")
            third = test.start("third")
            try:
                events = await _wait_for(third, session["session_id"], "run_resumed", 1, 5)
                resumed = min(i for i, e in enumerate(events) if e["type"] == "run_resumed")
                after = [(e["type"], e.get("status")) for e in events[resumed:]]
                assert ("run_finished", "interrupted") in after, f"the second kill left no marker: {after}"
                await _wait_for(third, session["session_id"], "run_resumed", 2, 30)
            finally:
                third.stop()
        finally:
            for pid in living(test.marker):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
