"""Start-up: ``loom --help`` against ``python -c pass``, and a listing (``loom runs``) against ``loom --help``.

The two commands of a figure are run alternately, as fresh subprocesses, so that a burst of load on the
machine hits both; the figure is the ratio of their medians. ``python -X importtime`` then names the
heaviest top-level imports of the command measured, which is where to look when the ratio is poor. The
listing reads a real store (a few runs of a scripted model, recorded first) with no daemon running.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from benchmarks._report import Figure, fmt_time, median, paired_ratio

TARGET = 6.0

_IMPORTTIME = re.compile(r"^import time:\s+(\d+)\s+\|\s+(\d+)\s+\|( *)(\S+)")


def loom_script() -> Path:
    """The ``loom`` console script installed next to this interpreter."""
    script = Path(sys.executable).parent / "loom"
    if not script.exists():
        raise SystemExit(f"no loom console script next to {sys.executable}; install the package (pip install -e .)")
    return script


def _time_once(argv: list[str], env: Mapping[str, str] | None = None) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def _top_level_imports(argv: list[str], env: Mapping[str, str] | None = None) -> dict[str, int]:
    """Cumulative import time (µs) of each top-level import the command makes."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", *argv],
        check=True,
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
    )
    found: dict[str, int] = {}
    for line in proc.stderr.splitlines():
        match = _IMPORTTIME.match(line)
        if match and match.group(3) == " ":  # one space after the bar: imported by the script itself
            found[match.group(4)] = int(match.group(2))
    return found


def heaviest_imports(count: int = 5) -> list[tuple[str, int]]:
    """The top-level imports of ``loom --help`` that ``python -c pass`` does not make, heaviest first."""
    baseline = _top_level_imports(["-c", "pass"])
    loom = _top_level_imports([str(loom_script()), "--help"])
    extra = [(name, us) for name, us in loom.items() if name not in baseline]
    return sorted(extra, key=lambda item: item[1], reverse=True)[:count]


def measure(runs: int, warmup: int = 3) -> Figure:
    """Median wall time of ``loom --help`` over ``python -c pass``, ``runs`` alternating runs each."""
    python = [sys.executable, "-c", "pass"]
    loom = [str(loom_script()), "--help"]
    for _ in range(warmup):  # fill the page cache and the __pycache__ directories
        _time_once(python)
        _time_once(loom)
    python_s: list[float] = []
    loom_s: list[float] = []
    for _ in range(runs):
        python_s.append(_time_once(python))
        loom_s.append(_time_once(loom))
    base, ours = median(python_s), median(loom_s)
    _, spread = paired_ratio(loom_s, python_s)
    imports = heaviest_imports()
    figure = Figure(
        key="startup",
        title="start-up: loom --help",
        measured=f"{fmt_time(ours)} vs python -c pass {fmt_time(base)} (median of {runs})",
        ratio=ours / base,
        target=TARGET,
        # Start-ups are independent, so the figure is the ratio of the medians; the range is that of the
        # alternating pairs, to show how noisy single runs are.
        ratio_range=spread,
        data={"python_s": python_s, "loom_s": loom_s, "heaviest_imports_us": dict(imports)},
    )
    listed = ", ".join(f"{name} {us / 1000:.1f} ms" for name, us in imports) or "none"
    figure.notes.append(f"heaviest imports loom --help adds (python -X importtime, cumulative): {listed}")
    return figure


RUNTIME_IMPORT = "import orchestrator.runtime.embedded, orchestrator.runtime.runtime, servers.fs, servers.shell"
"""What every ``loom run`` (and, for its server, ``loom server``) loads before it can do anything."""


def _self_time_by_package(argv: list[str], env: Mapping[str, str] | None = None) -> dict[str, int]:
    """Import time (µs, self only) summed by top-level package."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", *argv],
        check=True,
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
    )
    found: dict[str, int] = {}
    for line in proc.stderr.splitlines():
        match = _IMPORTTIME.match(line)
        if match:
            package = match.group(4).split(".")[0]
            found[package] = found.get(package, 0) + int(match.group(1))
    return found


def measure_runtime_import(runs: int, warmup: int = 1) -> Figure:
    """Median wall time of importing the runtime against ``python -c pass`` (information, no target)."""
    python = [sys.executable, "-c", "pass"]
    runtime = [sys.executable, "-c", RUNTIME_IMPORT]
    for _ in range(warmup):
        _time_once(python)
        _time_once(runtime)
    python_s: list[float] = []
    runtime_s: list[float] = []
    for _ in range(runs):
        python_s.append(_time_once(python))
        runtime_s.append(_time_once(runtime))
    base, ours = median(python_s), median(runtime_s)
    _, spread = paired_ratio(runtime_s, python_s)
    packages = sorted(_self_time_by_package(["-c", RUNTIME_IMPORT]).items(), key=lambda item: item[1], reverse=True)
    listed = ", ".join(f"{name} {us / 1e6:.2f} s" for name, us in packages[:5])
    return Figure(
        key="runtime_import",
        title="runtime import (loom run's floor)",
        measured=f"{fmt_time(ours)} vs python -c pass {fmt_time(base)} (median of {runs})",
        ratio=ours / base,
        target=None,
        ratio_range=spread,
        notes=[f"python -c '{RUNTIME_IMPORT}'; import time by package (self, summed): {listed}"],
        data={"python_s": python_s, "runtime_s": runtime_s, "self_us_by_package": dict(packages[:10])},
    )


LISTING_TARGET = 5.0
"""``loom runs`` may take at most this many times ``loom --help``: it reads the store, nothing more."""

_SEED_SCRIPT = (
    '{"turns": [{"text": "listing", "tool_calls": [{"name": "fs__list", "arguments": {}}]}, {"text": "done"}]}'
)


def _seeded_home(root: Path, runs: int) -> dict[str, str]:
    """An environment whose ``LOOM_HOME`` under ``root`` holds ``runs`` finished runs of a scripted model."""
    script = root / "script.json"
    script.write_text(_SEED_SCRIPT, encoding="utf-8")
    env = {**os.environ, "LOOM_HOME": str(root / "home")}
    for _ in range(runs):
        argv = [str(loom_script()), "run", "--model", f"scripted:{script}", "list the directory"]
        subprocess.run(argv, check=True, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return env


def measure_listing(runs: int, warmup: int = 3, seeded_runs: int = 3, command: str = "runs") -> Figure:
    """Median wall time of ``loom COMMAND`` (a listing, no daemon) over ``loom --help``, alternating, on a store."""
    with tempfile.TemporaryDirectory(prefix="loom-bench-listing-") as tmp:
        env = _seeded_home(Path(tmp), seeded_runs)
        listing = [str(loom_script()), command]
        helping = [str(loom_script()), "--help"]
        for _ in range(warmup):
            _time_once(helping, env)
            _time_once(listing, env)
        help_s: list[float] = []
        runs_s: list[float] = []
        for _ in range(runs):
            help_s.append(_time_once(helping, env))
            runs_s.append(_time_once(listing, env))
        imports = _top_level_imports(listing, env)
        packages = _self_time_by_package(listing, env)
    base, ours = median(help_s), median(runs_s)
    _, spread = paired_ratio(runs_s, help_s)
    heaviest = sorted(imports.items(), key=lambda item: item[1], reverse=True)[:5]
    listed = ", ".join(f"{name} {us / 1000:.1f} ms" for name, us in heaviest) or "none"
    sdk = "imports the MCP SDK" if "mcp" in packages else "does not import the MCP SDK"
    return Figure(
        key="listing" if command == "runs" else f"listing_{command}",
        title=f"listing: loom {command} vs loom --help",
        measured=f"{fmt_time(ours)} vs loom --help {fmt_time(base)} (median of {runs}, {seeded_runs} runs stored)",
        ratio=ours / base,
        target=LISTING_TARGET,
        ratio_range=spread,
        notes=[f"loom {command} {sdk}; its heaviest top-level imports (cumulative): {listed}"],
        data={"help_s": help_s, "runs_s": runs_s, "top_level_imports_us": dict(heaviest)},
    )
