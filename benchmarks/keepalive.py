"""One kept-alive HTTP request to the daemon, ``GET /health``, against the same request on a fresh connection.

The daemon is a real ``loom serve`` subprocess (uvicorn on 127.0.0.1) with its own ``LOOM_HOME``. The
client is ``httpx2`` with the daemon's bearer token. Each repetition times a batch of requests on one
connection that stays open (the median taken), then the same number each on a new connection (a new
client per request, made outside the timing, so a request pays the TCP connect and nothing else).

Two figures: the kept-alive request against a 5 ms budget, and, for information, its ratio to the fresh
connection. A kept-alive request slower than a fresh one is the signature of Nagle's algorithm on the
daemon's accepted sockets: the response's second write waits for the client's delayed ACK, some 40 ms.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx2

from benchmarks._procs import http_client, loom_serve, timed
from benchmarks._report import Figure, fmt_time, median, paired_ratio

BUDGET_S = 0.005


async def _get(client: httpx2.AsyncClient, url: str) -> None:
    response = await client.get(url)
    if response.status_code != 200 or response.json().get("ok") is not True:
        raise AssertionError(f"GET /health answered {response.status_code}: {response.text[:200]}")


async def _fresh(token: str, url: str) -> float:
    async with http_client(token) as client:
        return await timed(_get(client, url))


async def _measure(base: Path, reps: int, per_rep: int) -> tuple[list[float], list[float]]:
    kept_s: list[float] = []
    fresh_s: list[float] = []
    async with loom_serve(base / "home", base / "daemon") as daemon, http_client(daemon.token) as kept:
        url = f"{daemon.origin}/health"
        for _ in range(3):  # warm-up; the first opens the kept-alive connection
            await _get(kept, url)
            await _fresh(daemon.token, url)
        for _ in range(reps):
            kept_s.append(median([await timed(_get(kept, url)) for _ in range(per_rep)]))
            fresh_s.append(median([await _fresh(daemon.token, url) for _ in range(per_rep)]))
    return kept_s, fresh_s


def measure(base: Path, *, quick: bool = False) -> list[Figure]:
    """Kept-alive ``GET /health`` on the daemon: against 5 ms, and against a fresh connection."""
    reps, per_rep = (3, 10) if quick else (9, 30)
    kept_s, fresh_s = anyio.run(_measure, base, reps, per_rep)
    kept, fresh = median(kept_s), median(fresh_s)
    ratio, spread = paired_ratio(kept_s, fresh_s)
    note = f"median of {reps} repetitions of {per_rep} requests each way; loom serve subprocess, httpx2 client"
    return [
        Figure(
            key="keepalive_health",
            title="kept-alive GET /health on the daemon",
            measured=f"{fmt_time(kept)} vs {fmt_time(BUDGET_S)} budget",
            ratio=kept / BUDGET_S,
            target=1.0,
            ratio_range=(min(kept_s) / BUDGET_S, max(kept_s) / BUDGET_S),
            notes=[note],
            data={"kept_s": kept_s},
        ),
        Figure(
            key="keepalive_vs_fresh",
            title="kept-alive vs fresh connection",
            measured=f"GET /health kept-alive {fmt_time(kept)} vs on a new connection {fmt_time(fresh)}",
            ratio=ratio,
            target=None,
            ratio_range=spread,
            data={"kept_s": kept_s, "fresh_s": fresh_s},
        ),
    ]


if __name__ == "__main__":
    import sys
    import tempfile

    from benchmarks._report import render

    with tempfile.TemporaryDirectory(prefix="loom-bench-keepalive-") as tmp:
        print(render(measure(Path(tmp), quick="--quick" in sys.argv)))
