"""A long session: one ``send_message(wait_s)`` late in a session (sends 181-200) against early (sends 1-20).

The daemon is a real ``loom serve`` subprocess with its own ``LOOM_HOME``, driven by one MCP client over
streamable HTTP. Each send is a scripted one-turn answer (one model call, no tool call), so everything that
grows with the session's age shows up as growth of the send: re-reading the stored session, rebuilding
and re-estimating its history, waking on its events.

:data:`SESSIONS` sessions are sent to in turn (session 1, 2, 3, then 1 again), so that a burst of load on
the machine hits every session at the same age. A session's figure is the median send of its late window
over the median of its early window; the figure is the median over sessions, and its range the lowest and
highest session. The growth per earlier send (the slope of a least-squares line through every send) is
printed alongside. A cap on the whole benchmark's time makes a too-slow session a MISS rather than a hang.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import anyio

from benchmarks._procs import delegate, http_mcp, loom_serve, send, text_turns, timed, write_script
from benchmarks._report import Figure, fmt_time, median

TARGET = 1.2
SESSIONS = 3
CAP_S = 180.0


async def _measure(base: Path, sessions: int, sends: int, window: int) -> tuple[list[list[float]], bool]:
    cwd = base / "work"
    cwd.mkdir(parents=True)
    model = write_script(base / "script.json", text_turns(sends + 1))
    times: list[list[float]] = [[] for _ in range(sessions)]
    async with loom_serve(base / "home", base / "daemon") as daemon, http_mcp(daemon.url, daemon.token) as client:
        warm = await delegate(client, cwd, model)
        for _ in range(3):  # warm-up: validators, the daemon's first run, the page cache
            await send(client, warm)
        ids = [await delegate(client, cwd, model) for _ in range(sessions)]
        with anyio.move_on_after(CAP_S) as cap:
            for _ in range(sends):
                for session_id, mine in zip(ids, times, strict=True):
                    mine.append(await timed(send(client, session_id)))
    return times, cap.cancelled_caught


def _slope(values: list[float]) -> float:
    """Seconds added per earlier send: the least-squares slope of send time against its index."""
    if len(values) < 2:
        return 0.0
    return statistics.linear_regression(range(len(values)), values).slope


def _signed(seconds: float) -> str:
    return ("+" if seconds >= 0 else "−") + fmt_time(abs(seconds))


def measure(base: Path, *, quick: bool = False) -> Figure:
    """The late/early ratio of sends on long sessions (``quick``: one session, 60 sends, windows of 10)."""
    sessions, sends, window = (1, 60, 10) if quick else (SESSIONS, 200, 20)
    started = time.perf_counter()
    times, capped = anyio.run(_measure, base, sessions, sends, window)
    elapsed = time.perf_counter() - started
    complete = [t for t in times if len(t) == sends]
    miss = None
    if capped or not complete:
        miss = f"the {CAP_S:.0f} s cap was reached after {min(len(t) for t in times)} of {sends} sends per session"
        complete = [t for t in times if len(t) >= 2 * window] or [[1.0, 1.0]]
    early = [median(t[:window]) for t in complete]
    late = [median(t[-window:]) for t in complete]
    ratios = [lt / e for lt, e in zip(late, early, strict=True)]
    slopes = [_slope(t) for t in complete]
    last = f"{sends - window + 1}–{sends}"
    return Figure(
        key="send_flatness",
        title=f"one send on a session, sends {last} vs 1–{window}",
        measured=f"{fmt_time(median(late))} vs {fmt_time(median(early))} per send_message(wait) over HTTP",
        ratio=median(ratios),
        target=TARGET,
        ratio_range=(min(ratios), max(ratios)),
        notes=[
            f"{len(complete)} session(s) × {sends} sends, in turn, on one loom serve; medians of each window; "
            f"{_signed(median(slopes))} per earlier send (least squares); {elapsed:.0f} s"
        ],
        miss_reason=miss,
        data={"sends_s": times, "slope_s": slopes},
    )


if __name__ == "__main__":
    import sys
    import tempfile

    from benchmarks._report import render

    with tempfile.TemporaryDirectory(prefix="loom-bench-sends-") as tmp:
        print(render([measure(Path(tmp), quick="--quick" in sys.argv)]))
