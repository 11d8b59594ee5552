"""The cost of one in-memory MCP tool call against calling the same function directly.

``Client(server)`` on an in-process ``MCPServer`` uses the SDK's direct dispatcher (no streams, no
JSON framing). This is how Loom reaches its own servers, so it is the floor under every tool call
the agent loop makes; :mod:`benchmarks.loop` measures a loop step against it.
"""

from __future__ import annotations

import time

from mcp import Client
from mcp.server.mcpserver import MCPServer

from benchmarks._report import Figure, fmt_time, median, paired_ratio


async def ping(x: int) -> int:
    """Return ``x``: a tool that does nothing, so that only the call machinery is measured."""
    return x


def build_bench_server() -> MCPServer:
    """An in-process MCP server with the one trivial tool ``ping``."""
    server: MCPServer = MCPServer("bench", log_level="WARNING")
    server.add_tool(ping, name="ping", description="Return x unchanged.")
    return server


async def raw_call_times(client: Client, calls: int) -> list[float]:
    """Seconds taken by each of ``calls`` sequential ``ping`` calls through ``client``."""
    times: list[float] = []
    for i in range(calls):
        started = time.perf_counter()
        result = await client.call_tool("ping", {"x": i})
        times.append(time.perf_counter() - started)
        if result.is_error or result.structured_content != {"result": i}:
            raise AssertionError(f"ping({i}) returned {result!r}")
    return times


async def direct_call_time(calls: int) -> float:
    """Mean seconds per direct ``await ping(i)``; too short to time one by one."""
    total = 0
    started = time.perf_counter()
    for i in range(calls):
        total += await ping(i)
    elapsed = time.perf_counter() - started
    if total != calls * (calls - 1) // 2:
        raise AssertionError("direct ping returned wrong values")
    return elapsed / calls


async def measure(repetitions: int, calls: int, direct_calls: int) -> Figure:
    """Median per-call time of an in-memory MCP call against a direct call, ``repetitions`` times."""
    mcp_s: list[float] = []
    direct_s: list[float] = []
    async with Client(build_bench_server()) as client:
        await raw_call_times(client, 50)  # warm-up; also keeps the first call's tools/list out of the timing
        await direct_call_time(direct_calls)
        for _ in range(repetitions):
            mcp_s.append(median(await raw_call_times(client, calls)))
            direct_s.append(await direct_call_time(direct_calls))
    ours, base = median(mcp_s), median(direct_s)
    ratio, spread = paired_ratio(mcp_s, direct_s)
    return Figure(
        key="mcp_call",
        title="in-memory MCP call: ping(x)",
        measured=f"{fmt_time(ours)} vs direct await {fmt_time(base)}",
        ratio=ratio,
        target=None,
        ratio_range=spread,
        notes=[f"{1 / ours:,.0f} in-memory calls/s; median of {repetitions} × {calls} calls (each call timed)"],
        data={"mcp_call_s": mcp_s, "direct_call_s": direct_s},
    )
