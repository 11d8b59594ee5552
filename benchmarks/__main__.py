"""``python -m benchmarks``: Loom's performance figures, each a ratio with a target.

Not part of the test suite: timings on a shared machine are too noisy to fail a build on. Every
figure compares two things measured alternately in the same process or run, takes medians over
repetitions after a warm-up, and is printed with its target and PASS/MISS. See docs/performance.md.

    python -m benchmarks            # full run, about 8 minutes
    python -m benchmarks --quick    # smoke run, about 2 minutes
    python -m benchmarks --only delegate --only crowd   # some groups only
    python -m benchmarks --json out.json
    python -m benchmarks --profile  # cProfile of one 200-step loop run instead
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio

from benchmarks import (
    attach,
    calls,
    context,
    crowd,
    delegate,
    engine,
    keepalive,
    live,
    loop,
    memory,
    resume,
    sends,
    startup,
    store,
    subagents,
    tui,
)
from benchmarks._report import Figure, render


@dataclass(frozen=True)
class Plan:
    """How many repetitions of what."""

    startup_runs: int
    startup_warmup: int
    import_runs: int
    call_reps: int
    calls_per_rep: int
    direct_calls: int
    step_reps: int
    steps_per_run: int
    raw_calls_per_rep: int
    runtime_reps: int
    runtime_steps: int
    flat_runs: int
    store_reps: int
    store_steps: int
    resume_steps: int
    resume_reps: int
    context_reps: int
    context_events: int


FULL = Plan(
    startup_runs=21,
    startup_warmup=3,
    import_runs=5,
    call_reps=7,
    calls_per_rep=500,
    direct_calls=100_000,
    step_reps=7,
    steps_per_run=100,
    raw_calls_per_rep=300,
    runtime_reps=5,
    runtime_steps=50,
    flat_runs=21,
    store_reps=3,
    store_steps=100,
    resume_steps=1000,
    resume_reps=5,
    context_reps=7,
    context_events=10_000,
)
QUICK = Plan(
    startup_runs=5,
    startup_warmup=1,
    import_runs=1,
    call_reps=3,
    calls_per_rep=100,
    direct_calls=20_000,
    step_reps=3,
    steps_per_run=30,
    raw_calls_per_rep=60,
    runtime_reps=2,
    runtime_steps=20,
    flat_runs=3,
    store_reps=1,
    store_steps=20,
    resume_steps=100,
    resume_reps=2,
    context_reps=2,
    context_events=2_000,
)


async def _in_process(plan: Plan, home: Path) -> list[Figure]:
    figures = [await calls.measure(plan.call_reps, plan.calls_per_rep, plan.direct_calls)]
    (home / "step").mkdir()
    figures.append(await loop.measure_step(home / "step", plan.step_reps, plan.steps_per_run, plan.raw_calls_per_rep))
    (home / "runtime").mkdir()
    figures.append(
        await loop.measure_runtime_step(home / "runtime", plan.runtime_reps, plan.runtime_steps, plan.raw_calls_per_rep)
    )
    (home / "flat").mkdir()
    figures.append(await loop.measure_flatness(home / "flat", plan.flat_runs))
    (home / "store").mkdir()
    figures.extend(await store.measure(home / "store", plan.store_reps, plan.store_steps))
    return figures


GROUPS = (
    "startup",
    "in-process",
    "resume",
    "context",
    "live",
    "delegate",
    "sends",
    "keepalive",
    "crowd",
    "memory",
    "attach",
    "tui",
    "subagents",
    "engine",
)
"""The benchmark groups, in the order they run; ``--only`` picks some."""


def _groups(plan: Plan, tmp: Path, quick: bool) -> list[tuple[str, Callable[[], list[Figure]]]]:
    """Each group's name and a function that runs it in a directory of its own under ``tmp``."""

    def where(name: str) -> Path:
        path = tmp / name
        path.mkdir()
        return path

    def run_startup() -> list[Figure]:
        return [
            startup.measure(plan.startup_runs, plan.startup_warmup),
            startup.measure_runtime_import(plan.import_runs, warmup=1),
            startup.measure_listing(plan.startup_runs, plan.startup_warmup),
            startup.measure_listing(plan.startup_runs, plan.startup_warmup, command="sessions"),
        ]

    groups: list[tuple[str, Callable[[], list[Figure]]]] = [
        ("startup", run_startup),
        ("in-process", lambda: anyio.run(_in_process, plan, where("in-process"))),
        ("resume", lambda: [resume.measure(where("resume"), plan.resume_steps, plan.resume_reps)]),
        ("context", lambda: [anyio.run(context.measure, where("context"), plan.context_reps, plan.context_events)]),
        ("live", lambda: live.measure(where("live"), quick=quick)),
        # Issue 13: delegation, long sessions and many sessions, each through real `loom` subprocesses.
        ("delegate", lambda: delegate.measure(where("delegate"), quick=quick)),
        ("sends", lambda: [sends.measure(where("sends"), quick=quick)]),
        ("keepalive", lambda: keepalive.measure(where("keepalive"), quick=quick)),
        ("crowd", lambda: crowd.measure(where("crowd"), quick=quick)),
        ("memory", lambda: [memory.measure(where("memory"), quick=quick)]),
        ("attach", lambda: [attach.measure(where("attach"), quick=quick)]),
        ("tui", lambda: anyio.run(tui.measure, where("tui"), quick)),
        # Issue 15: children through the subagents server on a daemon, alone and 20 at once.
        ("subagents", lambda: subagents.measure(where("subagents"), quick=quick)),
        # Issue 18: the DBOS engine over a private Postgres cluster (skipped, saying so, without Postgres).
        ("engine", lambda: engine.measure(where("engine"), quick=quick)),
    ]
    assert tuple(name for name, _ in groups) == GROUPS
    return groups


def _machine() -> dict[str, object]:
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "loadavg_1m": round(load[0], 2),
    }


def _profile(steps: int, top: int) -> str:
    """cProfile of one ``steps``-step run of the bench rig (the event loop thread only)."""
    with tempfile.TemporaryDirectory(prefix="loom-bench-") as tmp:
        home = Path(tmp)

        async def body() -> None:
            async with loop.bench_rig(home) as rig:
                await rig.run(20)  # warm-up outside the interesting part is fine: it is small
                profiler.enable()
                await rig.run(steps)
                profiler.disable()

        profiler = cProfile.Profile()
        anyio.run(body)
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmarks and print the table; returns 0 (a MISS is a finding, not an error)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few repetitions: a smoke test, not figures")
    parser.add_argument("--json", metavar="PATH", type=Path, help="also write the figures as JSON to PATH")
    parser.add_argument(
        "--only", metavar="GROUP", action="append", choices=GROUPS, help=f"run only these groups: {', '.join(GROUPS)}"
    )
    parser.add_argument("--profile", action="store_true", help="print a cProfile of one 200-step loop run and exit")
    args = parser.parse_args(argv)
    if args.profile:
        print(_profile(loop.FLAT_STEPS, 30))
        return 0
    plan = QUICK if args.quick else FULL
    machine = _machine()
    mode = "quick" if args.quick else "full"
    print(
        f"Loom benchmarks ({mode}): Python {machine['python']} on {machine['platform']}, "
        f"{machine['cpus']} CPUs, load {machine['loadavg_1m']}",
        flush=True,
    )
    started = time.perf_counter()
    figures: list[Figure] = []
    with tempfile.TemporaryDirectory(prefix="loom-bench-") as tmp:
        for name, run in _groups(plan, Path(tmp), args.quick):
            if args.only and name not in args.only:
                continue
            began = time.perf_counter()
            figures.extend(run())
            print(f"  {name}: {time.perf_counter() - began:.0f} s", file=sys.stderr, flush=True)
    elapsed = time.perf_counter() - started
    print(render(figures))
    print(f"({elapsed:.0f} s)")
    if args.json is not None:
        document = {"mode": mode, "machine": machine, "seconds": round(elapsed, 1)}
        document["figures"] = [f.as_json() for f in figures]
        args.json.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
