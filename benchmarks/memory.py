"""Daemon memory: its resident set after 1,000 one-run sessions against after 10.

The daemon is a real ``loom serve`` subprocess with its own ``LOOM_HOME``. :data:`WORKERS` MCP clients
over streamable HTTP each, in a loop, open a session (``create_session``) and run it once to its end
(``send_message(wait_s=30)``, a scripted one-turn answer), then leave it alone, as a delegating agent
does. At the end no run is live, so a daemon whose memory is bounded by live sessions is back near where
it was after the first few. The daemon's RSS is read from ``/proc/PID/status`` after 10 sessions and at
a few points up to the last; the figure is RSS(last) / RSS(10). The whole benchmark is capped in time: a
cap reached is a MISS, with the RSS reached and the growth per session.
"""

from __future__ import annotations

import time
from pathlib import Path

import anyio

from benchmarks._procs import delegate, http_mcp, loom_serve, rss_bytes, send, text_turns, write_script
from benchmarks._report import Figure, median

TARGET = 1.25
"""Room for allocator fragmentation; an unbounded daemon ends several times higher."""
WORKERS = 4
CAP_S = 240.0
"""About 0.2 s of the daemon's time per session on a quiet machine: 1,000 fit with room for load."""
_MIB = 1024 * 1024


async def _measure(base: Path, total: int, marks: list[int]) -> tuple[dict[int, int], int, float, bool]:
    cwd = base / "work"
    cwd.mkdir(parents=True)
    model = write_script(base / "script.json", text_turns(2))
    rss: dict[int, int] = {}
    done = 0
    durations: list[float] = []
    async with loom_serve(base / "home", base / "daemon") as daemon:

        async def worker(quota: int) -> None:
            nonlocal done
            async with http_mcp(daemon.url, daemon.token) as client:
                for _ in range(quota):
                    started = time.perf_counter()
                    await send(client, await delegate(client, cwd, model))
                    durations.append(time.perf_counter() - started)
                    done += 1
                    if done in marks:
                        rss[done] = rss_bytes(daemon.pid)

        with anyio.move_on_after(CAP_S) as cap:
            await worker(marks[0])  # the first sessions alone: the reference point is not mid-burst
            async with anyio.create_task_group() as tg:
                rest = total - marks[0]
                for w in range(WORKERS):
                    tg.start_soon(worker, rest // WORKERS + (1 if w < rest % WORKERS else 0))
        rss[done] = rss_bytes(daemon.pid)
    return rss, done, median(durations) if durations else 0.0, cap.cancelled_caught


def measure(base: Path, *, quick: bool = False) -> Figure:
    """RSS after ``1,000`` one-run sessions over RSS after 10 (``quick``: 60 over 10)."""
    total = 60 if quick else 1000
    marks = [10, 30, 60] if quick else [10, 100, 250, 500, 750, 1000]
    started = time.perf_counter()
    rss, done, per_session, capped = anyio.run(_measure, base, total, marks)
    elapsed = time.perf_counter() - started
    first = rss[marks[0]]
    last_n = max(rss)
    growth = (rss[last_n] - first) / max(1, last_n - marks[0])
    curve = ", ".join(f"{n}: {rss[n] / _MIB:.0f} MiB" for n in sorted(rss))
    # The second half's slope tells a plateau (bounded, above RSS(10) by the sessions kept open) from growth.
    half = min(sorted(rss), key=lambda n: abs(n - last_n / 2))
    late = (rss[last_n] - rss[half]) / max(1, last_n - half)
    miss = None
    if capped or done < total:
        miss = f"the {CAP_S:.0f} s cap was reached after {done} of {total} sessions"
    return Figure(
        key="daemon_rss",
        title=f"daemon RSS after {last_n:,} one-run sessions vs 10",
        measured=f"{rss[last_n] / _MIB:.0f} MiB vs {first / _MIB:.0f} MiB, +{growth / 1024:.0f} KiB per session",
        ratio=rss[last_n] / first,
        target=TARGET,
        notes=[
            f"RSS by sessions opened ({curve}); {WORKERS} clients at once, a session and its run "
            f"{per_session * 1000:.0f} ms (median); {elapsed:.0f} s",
            f"from {half:,} to {last_n:,} sessions: {late / 1024:+.0f} KiB per session",
        ],
        miss_reason=miss,
        data={
            "rss_bytes": {str(n): v for n, v in sorted(rss.items())},
            "sessions": done,
            "per_session_s": per_session,
            "late_growth_bytes_per_session": late,
        },
    )


if __name__ == "__main__":
    import sys
    import tempfile

    from benchmarks._report import render

    with tempfile.TemporaryDirectory(prefix="loom-bench-memory-") as tmp:
        print(render([measure(Path(tmp), quick="--quick" in sys.argv)]))
