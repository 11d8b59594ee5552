"""Subagents: what a child costs against a plain session, and 20 children at once against one.

The daemon is a real ``loom serve`` subprocess with its own ``LOOM_HOME``. The subagents server runs in this
process as ``loom server subagents --parent P`` runs it: its tools called over an in-memory MCP connection, each
tool call opening its own client of the daemon's face (:func:`clients.loom.open_client`). The parent ``P`` is a
session of the daemon, so every child is created with ``parent_session_id`` and narrowed from it.

- **spawn overhead**: a child's whole life through the server (``spawn``, then ``wait`` until it has finished,
  its summary made from its events) against a plain session's (``create_session``, ``send_message``,
  ``get_run`` waiting for the end) over one held client, the same one-turn scripted answer, alternated; the
  figure is the median of the per-repetition ratios.
- **fan-out**: ``spawn_many`` of 20 children then ``wait(mode="all")`` against ``spawn`` of one then ``wait``,
  each child making two model calls of :data:`THINK_S` (a fast model's latency) around an ``fs__list`` call,
  as a child spends most of its life waiting for its model; the figure is the wall-time ratio.
- **daemon RSS**: the daemon's resident set after the fan-out repetitions against before them (information).

Each part is capped in time; a cap reached is a MISS saying how far it got.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from benchmarks._procs import loom_serve, rss_bytes, structured, write_script
from benchmarks._report import Figure, fmt_ratio, fmt_time, median, paired_ratio
from clients.loom import LoomClient, open_client
from servers.subagents import build_server

SPAWN_TARGET = 1.5
FAN_OUT_TARGET = 5.0
CHILDREN = 20
THINK_S = 0.25
CAP_S = 50.0
"""Per part: the whole benchmark stays under two minutes."""
_MIB = 1024 * 1024


def _fan_out_turns() -> list[dict[str, Any]]:
    return [
        {"text": "Looking.", "delay_s": THINK_S, "tool_calls": [{"name": "fs__list", "arguments": {}}]},
        {"text": "Done: listed it.", "delay_s": THINK_S},
    ]


async def _plain(loom: LoomClient, cwd: Path, model: str) -> float:
    started = time.perf_counter()
    session = await loom.create_session(str(cwd), model=model, mode="plan", headless=True)
    run = await loom.send_message(session.session_id, "answer")
    done = await loom.get_run(run.run_id, wait_s=30)
    if done.status != "completed":
        raise AssertionError(f"plain session ended {done.status}: {done.reason}")
    return time.perf_counter() - started


async def _children(tools: Client, specs: list[dict[str, Any]]) -> float:
    started = time.perf_counter()
    if len(specs) == 1:
        structured(await tools.call_tool("spawn", specs[0]), "spawn")
    else:
        many = structured(await tools.call_tool("spawn_many", {"children": specs}), "spawn_many")
        if many["refused"]:
            raise AssertionError(f"spawn_many refused children: {many['children']}")
    waited = structured(await tools.call_tool("wait", {"mode": "all", "timeout_s": 60}), "wait")
    statuses = [c["status"] for c in waited["finished"]]
    if waited["running"] or statuses != ["completed"] * len(specs):
        raise AssertionError(f"children did not all complete: {statuses}, {len(waited['running'])} running")
    return time.perf_counter() - started


@contextlib.asynccontextmanager
async def _rig(base: Path) -> AsyncIterator[tuple[LoomClient, Client, Path, int]]:
    """A daemon, a held client of it, the subagents server of a parent session on it, the work directory, the pid."""
    cwd = base / "work"
    cwd.mkdir(parents=True)
    home = base / "home"
    async with loom_serve(home, base / "daemon") as daemon:

        @contextlib.asynccontextmanager
        async def connect() -> AsyncIterator[LoomClient]:
            async with open_client(home, require_daemon=True, client_name="bench-subagents") as loom:
                yield loom

        async with open_client(home, require_daemon=True, client_name="bench") as loom:
            parent_model = write_script(base / "parent.json", [{"text": "parent"}])
            parent = await loom.create_session(str(cwd), model=parent_model, mode="plan", headless=True)
            server = build_server(connect, session_id=parent.session_id, cwd=cwd, home=home, project=cwd)
            async with Client(server) as tools:
                yield loom, tools, cwd, daemon.pid


async def _measure(base: Path, reps: int, fan_reps: int) -> dict[str, Any]:
    one_turn = write_script(base / "one.json", [{"text": "Done."}])
    fan = write_script(base / "fan.json", _fan_out_turns())
    out: dict[str, Any] = {"plain": [], "child": [], "one": [], "many": [], "rss": {}, "capped": []}
    async with _rig(base) as (loom, tools, cwd, pid):
        spec = {"goal": "answer", "model": one_turn}
        await _plain(loom, cwd, one_turn)  # warm-up: validators, the page cache, first connections
        await _children(tools, [spec])
        with anyio.move_on_after(CAP_S) as cap:
            for _ in range(reps):
                out["plain"].append(await _plain(loom, cwd, one_turn))
                out["child"].append(await _children(tools, [spec]))
        if cap.cancelled_caught:
            out["capped"].append(f"spawn overhead: {len(out['child'])} of {reps} repetitions in {CAP_S:.0f} s")
        fan_spec = {"goal": "list the directory", "model": fan}
        out["rss"]["before"] = rss_bytes(pid)
        with anyio.move_on_after(CAP_S) as cap:
            for _ in range(fan_reps):
                out["one"].append(await _children(tools, [fan_spec]))
                out["many"].append(await _children(tools, [fan_spec] * CHILDREN))
        if cap.cancelled_caught:
            out["capped"].append(f"fan-out: {len(out['many'])} of {fan_reps} repetitions in {CAP_S:.0f} s")
        out["rss"]["after"] = rss_bytes(pid)
    return out


def measure(base: Path, *, quick: bool = False) -> list[Figure]:
    """Spawn overhead (child vs plain session), fan-out (20 children vs one) and the daemon's RSS growth."""
    reps, fan_reps = (5, 2) if quick else (15, 5)
    started = time.perf_counter()
    out = anyio.run(_measure, base, reps, fan_reps)
    elapsed = time.perf_counter() - started
    figures: list[Figure] = []
    miss = "; ".join(out["capped"]) or None
    n = min(len(out["plain"]), len(out["child"]))
    if n:
        ratio, spread = paired_ratio(out["child"][:n], out["plain"][:n])
        child, plain = median(out["child"][:n]), median(out["plain"][:n])
    else:
        ratio, spread, child, plain = float("inf"), None, 0.0, 0.0
    figures.append(
        Figure(
            key="subagents_spawn",
            title="a child (spawn + wait) vs a plain session (create + send + get_run)",
            measured=f"{fmt_time(child)} vs {fmt_time(plain)}",
            ratio=ratio,
            target=SPAWN_TARGET,
            ratio_range=spread,
            notes=[f"{n} repetitions, one-turn scripted answer, on a `loom serve` daemon; {elapsed:.0f} s in all"],
            miss_reason=miss if n < reps else None,
            data={"child_s": out["child"], "plain_s": out["plain"]},
        )
    )
    m = min(len(out["one"]), len(out["many"]))
    one, many = (median(out["one"][:m]), median(out["many"][:m])) if m else (0.0, 0.0)
    figures.append(
        Figure(
            key="subagents_fan_out",
            title=f"{CHILDREN} children in parallel vs one (wall time)",
            measured=f"{fmt_time(many)} vs {fmt_time(one)}",
            ratio=many / one if m else float("inf"),
            target=FAN_OUT_TARGET,
            notes=[f"{m} repetitions; each child two model calls of {THINK_S * 1000:.0f} ms around fs__list"],
            miss_reason=miss if m < fan_reps else None,
            data={"one_s": out["one"], "many_s": out["many"]},
        )
    )
    before, after = out["rss"]["before"], out["rss"]["after"]
    spawned = m * (CHILDREN + 1)
    per_child = (after - before) / max(1, spawned)
    figures.append(
        Figure(
            key="subagents_rss",
            title=f"daemon RSS after {spawned} fan-out children vs before",
            measured=f"{after / _MIB:.0f} MiB vs {before / _MIB:.0f} MiB, {per_child / 1024:+.0f} KiB per child",
            ratio=after / before,
            target=None,
            notes=[f"growth per child {per_child / 1024:+.0f} KiB (ratio {fmt_ratio(after / before)})"],
            data={"before_bytes": before, "after_bytes": after, "children": spawned},
        )
    )
    return figures


if __name__ == "__main__":
    import sys
    import tempfile

    from benchmarks._report import render

    with tempfile.TemporaryDirectory(prefix="loom-bench-subagents-") as tmp:
        print(render(measure(Path(tmp), quick="--quick" in sys.argv)))
