"""``loom mcp`` attached to a daemon: spawn, handshake and ``tools/list``, against a minimal stdio server's.

What an agent pays each time it starts with Loom in its ``mcp.json`` while ``loom serve`` runs: the
client spawns ``loom mcp`` (the venv's console script, the daemon's ``LOOM_HOME``), which finds the
daemon and relays to it; the client makes the ``initialize`` handshake and lists the tools.

The issue's yardstick is Claude Code's ``claude mcp serve``, which is not installed on this machine. The
stand-in is :mod:`benchmarks.ping_server`, the smallest server on the Python MCP SDK, spawned, handshaken
and listed the same way: the SDK floor that a relay which does not import the SDK should beat. Both are
timed from the spawn to the ``tools/list`` answer, alternately, after warm-up pairs; the figure is the
ratio of the medians, the range the lowest and highest pair.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TextIO

import anyio

from benchmarks._procs import REPO_ROOT, loom_env, loom_mcp_argv, loom_serve, ping_argv, stdio_mcp
from benchmarks._report import Figure, fmt_time, median, paired_ratio

TARGET = 1.0
"""Faster than the stand-in, as the issue asks of ``loom mcp`` against Claude Code's server."""


async def _connect(argv: list[str], env: dict[str, str], cwd: Path, err: TextIO) -> tuple[float, int]:
    started = time.perf_counter()
    async with stdio_mcp(argv, env, cwd, err) as client:
        tools = await client.list_tools()
        elapsed = time.perf_counter() - started
    return elapsed, len(tools.tools)


async def _measure(base: Path, runs: int, warmup: int) -> tuple[list[float], list[float], int]:
    work = base / "work"
    work.mkdir(parents=True)
    loom_s: list[float] = []
    floor_s: list[float] = []
    listed = 0
    env = loom_env(base / "home")
    async with loom_serve(base / "home", base / "daemon"):
        with (base / "attach.stderr").open("w", encoding="utf-8") as err:
            for i in range(warmup + runs):
                ours, listed = await _connect(loom_mcp_argv(), env, work, err)
                theirs, _ = await _connect(ping_argv(), env, REPO_ROOT, err)
                if i >= warmup:
                    loom_s.append(ours)
                    floor_s.append(theirs)
    return loom_s, floor_s, listed


def measure(base: Path, *, quick: bool = False) -> Figure:
    """Spawn → handshake → ``tools/list`` of an attached ``loom mcp`` over the stand-in's."""
    runs, warmup = (3, 1) if quick else (9, 1)
    loom_s, floor_s, listed = anyio.run(_measure, base, runs, warmup)
    ours, theirs = median(loom_s), median(floor_s)
    _, spread = paired_ratio(loom_s, floor_s)
    return Figure(
        key="attach",
        title="loom mcp attached: spawn → tools/list",
        measured=f"{fmt_time(ours)} ({listed} tools) vs minimal SDK stdio server {fmt_time(theirs)} (median of {runs})",
        ratio=ours / theirs,
        target=TARGET,
        ratio_range=spread,
        notes=[
            "Claude Code's `claude mcp serve` is not installed here; the stand-in is benchmarks/ping_server.py "
            "(one tool on the Python MCP SDK), spawned, handshaken and listed the same way"
        ],
        data={"loom_s": loom_s, "floor_s": floor_s, "tools": listed},
    )


if __name__ == "__main__":
    import sys
    import tempfile

    from benchmarks._report import render

    with tempfile.TemporaryDirectory(prefix="loom-bench-attach-") as tmp:
        print(render([measure(Path(tmp), quick="--quick" in sys.argv)]))
