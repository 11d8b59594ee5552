"""Delegation: what another agent pays to hand Loom a task, against one raw call to the smallest MCP server.

Two faces, each a real subprocess reached the way another agent reaches it:

- **stdio**: ``loom mcp`` (the venv's console script) with a fresh ``LOOM_HOME`` and no daemon, so it runs
  its embedded runtime; the floor is :mod:`benchmarks.ping_server` over stdio;
- **HTTP**: ``loom serve`` (real uvicorn on 127.0.0.1) and an MCP client over streamable HTTP; the floor is
  the ping server over streamable HTTP, also under uvicorn.

Each repetition, back to back on the same two open connections: a batch of raw ``ping`` calls (each timed,
the median taken), then one **delegated session** (``create_session`` + ``send_message(wait_s=30)`` with a
scripted one-turn answer, timed as one), then a few more ``send_message(wait_s)`` on that session (each
timed, the median taken). The figures are the medians of the per-repetition ratios.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from mcp import Client

from benchmarks._procs import (
    REPO_ROOT,
    child_pid,
    cpu_seconds,
    delegate,
    http_mcp,
    loom_env,
    loom_mcp_argv,
    loom_serve,
    ping,
    ping_argv,
    ping_http,
    send,
    stdio_mcp,
    text_turns,
    timed,
    write_script,
)
from benchmarks._report import Figure, fmt_ratio, fmt_time, median, paired_ratio

DELEGATE_TARGET = 3.0
SEND_TARGET = 2.0


@dataclass
class _Samples:
    raw: list[float] = field(default_factory=list[float])
    stdio_raw: list[float] = field(default_factory=list[float])
    """Over HTTP, the raw stdio call too: the issue's yardstick for both faces."""
    delegated: list[float] = field(default_factory=list[float])
    created: list[float] = field(default_factory=list[float])
    sent: list[float] = field(default_factory=list[float])
    cpu_raw: float = 0.0
    """CPU the floor's server used for the timed raw calls, in all (seconds); then its count of calls."""
    raw_calls: int = 0
    cpu_delegated: float = 0.0
    """CPU Loom's process used for the delegated sessions, in all; then the sends, in all, and their count."""
    cpu_sent: float = 0.0
    sends: int = 0


@dataclass(frozen=True)
class _Pair:
    """The two connections a repetition uses (and, over HTTP, the raw stdio one), with the servers' pids."""

    loom: Client
    raw: Client
    stdio_raw: Client
    loom_pid: int
    raw_pid: int


async def _rep(pair: _Pair, cwd: Path, model: str, raw_calls: int, sends: int, into: _Samples) -> None:
    loom, raw, stdio_raw = pair.loom, pair.raw, pair.stdio_raw
    raw_cpu = cpu_seconds(pair.raw_pid)
    raw_s = [await timed(ping(raw, i)) for i in range(raw_calls)]
    raw_cpu = cpu_seconds(pair.raw_pid) - raw_cpu
    if stdio_raw is not raw:
        into.stdio_raw.append(median([await timed(ping(stdio_raw, i)) for i in range(raw_calls)]))
    loom_cpu = cpu_seconds(pair.loom_pid)
    started = time.perf_counter()
    session_id = await delegate(loom, cwd, model)
    created = time.perf_counter()
    await send(loom, session_id)
    done = time.perf_counter()
    delegated_cpu = cpu_seconds(pair.loom_pid)
    send_s = [await timed(send(loom, session_id)) for _ in range(sends)]
    into.cpu_sent += cpu_seconds(pair.loom_pid) - delegated_cpu
    into.cpu_delegated += delegated_cpu - loom_cpu
    into.cpu_raw += raw_cpu
    into.raw_calls += raw_calls
    into.sends += sends
    into.raw.append(median(raw_s))
    into.delegated.append(done - started)
    into.created.append(created - started)
    into.sent.append(median(send_s))


async def _measure(pair: _Pair, cwd: Path, model: str, reps: int, raw_calls: int, sends: int) -> _Samples:
    await _rep(pair, cwd, model, raw_calls, sends, _Samples())  # warm-up: validators, page cache, first runs
    samples = _Samples()
    for _ in range(reps):
        await _rep(pair, cwd, model, raw_calls, sends, samples)
    return samples


@contextlib.asynccontextmanager
async def _stdio_pair(base: Path) -> AsyncIterator[_Pair]:
    with (base / "loom-mcp.stderr").open("w", encoding="utf-8") as err:
        async with stdio_mcp(loom_mcp_argv(), loom_env(base / "home"), base / "work", err) as loom:
            loom_pid = child_pid("loom mcp")
            async with stdio_mcp(ping_argv(), loom_env(base / "home"), REPO_ROOT, err) as raw:
                yield _Pair(loom, raw, raw, loom_pid, child_pid("benchmarks.ping_server"))


@contextlib.asynccontextmanager
async def _http_pair(base: Path) -> AsyncIterator[_Pair]:
    with (base / "ping.stderr").open("w", encoding="utf-8") as err:
        async with (
            loom_serve(base / "home", base / "daemon") as daemon,
            ping_http(base) as ping_url,
            http_mcp(daemon.url, daemon.token) as loom,
            http_mcp(ping_url) as raw,
        ):
            raw_pid = child_pid("ping_server --http")
            async with stdio_mcp(ping_argv(), loom_env(base / "home"), REPO_ROOT, err) as stdio_raw:
                yield _Pair(loom, raw, stdio_raw, daemon.pid, raw_pid)


def _cpu_note(face: str, samples: _Samples) -> str:
    """Process CPU per operation (``/proc``): less moved by other jobs than wall time, whose CPU it leaves out."""
    reps = max(1, len(samples.delegated))
    per_raw = samples.cpu_raw / max(1, samples.raw_calls)
    per_delegated, per_send = samples.cpu_delegated / reps, samples.cpu_sent / max(1, samples.sends)
    ratios = f"{per_delegated / per_raw:.2f}× and {per_send / per_raw:.2f}×" if per_raw > 0 else "no raw CPU measured"
    who = "loom mcp" if face == "stdio" else "loom serve"
    return (
        f"CPU (user + system, /proc, 10 ms ticks summed over the repetitions): {who} {fmt_time(per_delegated)} per "
        f"delegated session, {fmt_time(per_send)} per send, against the ping server's {fmt_time(per_raw)} per call: "
        f"{ratios}"
    )


def _figures(face: str, floor: str, samples: _Samples, sends: int) -> list[Figure]:
    raw, whole = median(samples.raw), median(samples.delegated)
    ratio, spread = paired_ratio(samples.delegated, samples.raw)
    delegated = Figure(
        key=f"delegate_{face}",
        title=f"delegated session via {'loom mcp (stdio)' if face == 'stdio' else 'the daemon (HTTP)'}",
        measured=f"create_session + send_message(wait) {fmt_time(whole)} vs {floor} {fmt_time(raw)}",
        ratio=ratio,
        target=DELEGATE_TARGET,
        ratio_range=spread,
        notes=[
            f"median of {len(samples.raw)} paired repetitions; create_session {fmt_time(median(samples.created))}, "
            f"the first send_message(wait_s) {fmt_time(whole - median(samples.created))} "
            "(a scripted one-turn answer)"
        ],
        data={"raw_s": samples.raw, "delegated_s": samples.delegated, "created_s": samples.created},
    )
    if samples.stdio_raw:
        yardstick = median(samples.stdio_raw)
        delegated.notes.append(
            f"against the raw stdio ping ({fmt_time(yardstick)}, the issue's yardstick): "
            f"{fmt_ratio(paired_ratio(samples.delegated, samples.stdio_raw)[0])}; the HTTP floor is the same "
            "server under uvicorn, stateful with SSE responses as the daemon serves"
        )
        delegated.data["stdio_raw_s"] = samples.stdio_raw
    delegated.notes.append(_cpu_note(face, samples))
    ratio, spread = paired_ratio(samples.sent, samples.raw)
    sent = Figure(
        key=f"send_{face}",
        title=f"send_message on a session ({face})",
        measured=f"send_message(wait) {fmt_time(median(samples.sent))} vs {floor} {fmt_time(raw)}",
        ratio=ratio,
        target=SEND_TARGET,
        ratio_range=spread,
        notes=[f"each repetition: the median of {sends} sends on its session, sends 2 to {sends + 1} of it"],
        data={"raw_s": samples.raw, "sent_s": samples.sent},
    )
    if samples.stdio_raw:
        sent.notes.append(f"against the raw stdio ping: {fmt_ratio(paired_ratio(samples.sent, samples.stdio_raw)[0])}")
    return [delegated, sent]


async def _both(base: Path, reps: int, raw_calls: int, sends: int) -> list[Figure]:
    figures: list[Figure] = []
    for face, pair, floor in (("stdio", _stdio_pair, "raw stdio ping"), ("http", _http_pair, "raw HTTP ping")):
        where = base / face
        (where / "work").mkdir(parents=True)
        model = write_script(where / "script.json", text_turns(sends + 2))
        async with pair(where) as connected:
            samples = await _measure(connected, where / "work", model, reps, raw_calls, sends)
        figures.extend(_figures(face, floor, samples, sends))
    return figures


def measure(base: Path, *, quick: bool = False) -> list[Figure]:
    """The four delegation figures: a delegated session and a send, over stdio and over HTTP."""
    reps, raw_calls, sends = (3, 10, 3) if quick else (15, 20, 5)
    return anyio.run(_both, base, reps, raw_calls, sends)


if __name__ == "__main__":
    import sys
    import tempfile

    from benchmarks._report import render

    with tempfile.TemporaryDirectory(prefix="loom-bench-delegate-") as tmp:
        print(render(measure(Path(tmp), quick="--quick" in sys.argv)))
