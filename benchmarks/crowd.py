"""Many sessions at once: N scripted sessions over HTTP on a real daemon, each followed live by its client.

The daemon is a ``loom serve`` subprocess with its own ``LOOM_HOME``; the clients all live in this process
(so the daemon and its clients have a core each), one MCP client over streamable HTTP per session, each on
its own keep-alive HTTP client (as separate agents are). Each client creates its session
(``create_session``, at most :data:`CREATE_AT_ONCE` at a time), reads its events once to learn its cursor,
and waits until every client is ready. Then each opens one ``read_events(stream=True)`` call from its
cursor, which the daemon pushes every new page into (see :func:`orchestrator.face.live.stream_pages`), and
starts its run (``send_message``, ``wait_s=0``): it is following before it sends, as a TUI is. The call is
cancelled once the run's ``run_finished`` arrives (it is opened again should ``wait_s`` end first).

The run is :data:`TURNS`: two steps that list the session's directory through ``fs__list`` and a final
answer, each model call taking :data:`THINK_S` (a fast model's time to first token), so the events of a run
are spread over at least 150 ms rather than written in one burst.

Reported per N: whether every run finished within the cap, and the 99th percentile of **event delivery
latency**: the moment a follower received the page holding the event (this process's wall clock) minus the
event's ``ts`` (the daemon's wall clock when the runtime made the event, just before it stored it; one
machine, one clock). Then **linearity**: the runs' wall time per session at the largest N against the
smallest (from the first ``send_message`` to the last ``run_finished``). Each N is capped in time; a cap
reached is a MISS with how far it got.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from benchmarks._procs import (
    CALL_TIMEOUT_S,
    MODE,
    Daemon,
    delegate,
    http_client,
    loom_serve,
    send,
    structured,
    write_script,
)
from benchmarks._report import Figure, fmt_time, median

P99_TARGET_S = 0.05
LINEAR_TARGET = 1.2
CREATE_AT_ONCE = 8
THINK_S = 0.05
TURNS: list[dict[str, Any]] = [
    {"text": "Looking around.", "delay_s": THINK_S, "tool_calls": [{"name": "fs__list", "arguments": {"path": "."}}]},
    {"text": "Once more.", "delay_s": THINK_S, "tool_calls": [{"name": "fs__list", "arguments": {"path": "."}}]},
    {"text": "All done.", "delay_s": THINK_S},
]
CAPS_S = {10: 30.0, 50: 60.0, 200: 150.0}
"""The longest each N may take, session creation included; the full run stays under ten minutes."""
POLL_S = 20.0


@dataclass
class _Round:
    sessions: int
    created: int = 0
    finished: int = 0
    latencies: list[float] = field(default_factory=list[float])
    by_type: dict[str, list[float]] = field(default_factory=dict[str, list[float]])
    create_s: float = 0.0
    wall_s: float | None = None
    capped: bool = False
    all_created: anyio.Event = field(default_factory=anyio.Event)


async def _follow(
    daemon: Daemon, cwd: Path, model: str, state: _Round, gates: tuple[anyio.Semaphore, anyio.Event]
) -> None:
    creating, go = gates
    # Its own HTTP client, as a separate agent has: one pool shared by N clients, each holding two open requests,
    # made every request scan the whole pool (at N=200, 7 s of this process's CPU in the runs' window).
    async with (
        http_client(daemon.token) as http,
        Client(
            streamable_http_client(daemon.url, http_client=http), mode=MODE, read_timeout_seconds=CALL_TIMEOUT_S
        ) as client,
    ):
        async with creating:
            session_id = await delegate(client, cwd, model)
            page = await _read(client, session_id, 0, 0.0)
            await _compile_validator(client, session_id)
        follower = _Follower(state, session_id, int(page["next_after_seq"]))
        state.created += 1
        if state.created == state.sessions:
            state.all_created.set()
        await go.wait()
        async with anyio.create_task_group() as tg:
            # Following before sending, as a TUI is: the run's first events are pushed like the rest.
            tg.start_soon(follower.follow, client)
            run = structured(await client.call_tool("send_message", {"session_id": session_id, "text": "Go."}), "send")
            if run["status"] not in ("queued", "running", "completed"):
                raise AssertionError(f"the run did not start: {run}")


class _Follower:
    """One client's follower: a ``read_events(stream=True)`` call open at a time, until the run's end arrives."""

    def __init__(self, state: _Round, session_id: str, cursor: int) -> None:
        self.state, self.session_id, self.cursor = state, session_id, cursor
        self.finished = anyio.Event()

    async def follow(self, client: Client) -> None:
        with anyio.CancelScope() as following:
            async with anyio.create_task_group() as tg:

                async def stop_when_finished() -> None:
                    await self.finished.wait()
                    following.cancel()  # the open call is cancelled; its run is over

                tg.start_soon(stop_when_finished)
                while not self.finished.is_set():
                    args = {"session_id": self.session_id, "after_seq": self.cursor, "wait_s": POLL_S, "limit": 1000}
                    result = await client.call_tool(
                        "read_events", {**args, "stream": True}, progress_callback=self.pushed
                    )
                    self.take(structured(result, "read_events"), time.time())

    async def pushed(self, progress: float, total: float | None, message: str | None) -> None:
        """A page the daemon pushed during the call (its JSON is the progress message)."""
        if message is not None:
            self.take(json.loads(message), time.time())

    def take(self, page: dict[str, Any], now: float) -> None:
        self.cursor = max(self.cursor, int(page["next_after_seq"]))
        for event in page["events"]:
            latency = now - float(event["ts"])
            self.state.latencies.append(latency)
            self.state.by_type.setdefault(str(event["type"]), []).append(latency)
            if event["type"] == "run_finished":
                if event.get("status") != "completed":
                    raise AssertionError(f"a run ended {event.get('status')}: {event}")
                self.state.finished += 1
                self.finished.set()


async def _compile_validator(client: Client, session_id: str) -> None:
    """Have the SDK client build its validator of ``send_message``'s results now, not in the runs' window.

    It is built on a client's first result of each tool (about 20 ms here), which N clients in this one process
    would otherwise all do at the moment the runs start, delaying every follower in the process.
    """
    run = {"run_id": "r", "session_id": session_id, "status": "queued", "reason": "", "final_text": ""}
    await client.session.validate_tool_result("send_message", CallToolResult(content=[], structured_content=run))


async def _read(client: Client, session_id: str, after_seq: int, wait_s: float) -> dict[str, Any]:
    args = {"session_id": session_id, "after_seq": after_seq, "wait_s": wait_s, "limit": 1000}
    return structured(await client.call_tool("read_events", args), "read_events")


async def _round(base: Path, sessions: int, cap_s: float) -> _Round:
    state = _Round(sessions)
    cwd = base / "work"
    cwd.mkdir(parents=True)
    (cwd / "README.md").write_text("A small directory to list.\n", encoding="utf-8")
    model = write_script(base / "script.json", TURNS)
    async with loom_serve(base / "home", base / "daemon") as daemon:
        await _warm_up(daemon, cwd)
        go = anyio.Event()
        started = time.perf_counter()
        with anyio.move_on_after(cap_s) as cap:
            async with anyio.create_task_group() as tg:
                gates = (anyio.Semaphore(CREATE_AT_ONCE), go)
                for _ in range(sessions):
                    tg.start_soon(_follow, daemon, cwd, model, state, gates)
                await state.all_created.wait()
                state.create_s = time.perf_counter() - started
                runs_started = time.perf_counter()
                go.set()
            state.wall_s = time.perf_counter() - runs_started
        state.capped = cap.cancelled_caught
    return state


async def _warm_up(daemon: Daemon, cwd: Path) -> None:
    """One session run to its end first, so that the round does not time the daemon's first validators."""
    model = write_script(cwd.parent / "warm-up.json", TURNS)
    async with (
        http_client(daemon.token) as http,
        Client(streamable_http_client(daemon.url, http_client=http), mode=MODE) as client,
    ):
        await send(client, await delegate(client, cwd, model))


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _figure(state: _Round, cap_s: float) -> Figure:
    n = state.sessions
    p99 = _percentile(state.latencies, 0.99) if state.latencies else float("inf")
    p50 = median(state.latencies) if state.latencies else float("inf")
    notes = [
        f"N={n}: {state.created} sessions created in {state.create_s:.1f} s ({CREATE_AT_ONCE} at a time), "
        f"{state.finished} of {n} runs finished"
        + (f" in {state.wall_s:.2f} s" if state.wall_s is not None and not state.capped else "")
        + f"; {len(state.latencies):,} events delivered, p50 {fmt_time(p50)}"
    ]
    slowest = sorted(state.by_type.items(), key=lambda item: median(item[1]), reverse=True)[:4]
    if slowest:
        notes.append(
            f"N={n}: slowest event types (median delivery): "
            + ", ".join(f"{kind} {fmt_time(median(values))}" for kind, values in slowest)
        )
    miss = None
    if state.capped or state.finished < n:
        miss = f"N={n}: the {cap_s:.0f} s cap was reached with {state.finished} of {n} runs finished"
    return Figure(
        key=f"crowd_{n}",
        title=f"{n} followed sessions over HTTP: p99 delivery",
        measured=f"p99 {fmt_time(p99)} from event stored to follower (p50 {fmt_time(p50)}) vs 50 ms",
        ratio=p99 / P99_TARGET_S,
        target=1.0,
        notes=notes,
        miss_reason=miss,
        data={
            "sessions": n,
            "created": state.created,
            "finished": state.finished,
            "create_s": state.create_s,
            "wall_s": state.wall_s,
            "capped": state.capped,
            "p50_s": p50,
            "p99_s": p99,
            "events": len(state.latencies),
        },
    )


def _linearity(small: _Round, large: _Round) -> Figure:
    if small.wall_s is None or large.wall_s is None or small.capped or large.capped:
        per_small = per_large = ratio = float("inf")
        miss: str | None = f"N={large.sessions} did not finish within its cap"
    else:
        per_small, per_large = small.wall_s / small.sessions, large.wall_s / large.sessions
        ratio, miss = per_large / per_small, None
    return Figure(
        key="crowd_linear",
        title=f"wall time per session, N={large.sessions} vs N={small.sessions}",
        measured=f"{fmt_time(per_large)} vs {fmt_time(per_small)} per session (runs started to last run_finished)",
        ratio=ratio,
        target=LINEAR_TARGET,
        miss_reason=miss,
        data={"small": small.sessions, "large": large.sessions, "per_small_s": per_small, "per_large_s": per_large},
    )


def measure(base: Path, *, quick: bool = False) -> list[Figure]:
    """N followed sessions for N = 10, 50, 200 (10 only with ``quick``), each in its own daemon."""
    counts = [10] if quick else [10, 50, 200]
    # A follower cancels its open read once its run has ended; a page the daemon pushed just before the cancel can
    # arrive after the client has closed, which the SDK logs as an error with a traceback per follower.
    sdk_log = logging.getLogger("mcp.client.streamable_http")
    level = sdk_log.level
    sdk_log.setLevel(logging.CRITICAL)
    try:
        rounds = [anyio.run(_round, base / f"n{n}", n, CAPS_S[n]) for n in counts]
    finally:
        sdk_log.setLevel(level)
    figures = [_figure(state, CAPS_S[state.sessions]) for state in rounds]
    if len(rounds) > 1:
        figures.append(_linearity(rounds[0], rounds[-1]))
    return figures


if __name__ == "__main__":
    import sys
    import tempfile

    from benchmarks._report import render

    with tempfile.TemporaryDirectory(prefix="loom-bench-crowd-") as tmp:
        print(render(measure(Path(tmp), quick="--quick" in sys.argv)))
