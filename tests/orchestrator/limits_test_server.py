"""An external MCP server for the hub's time-limit, cancellation and retry tests, run over stdio.

Every tool appends what it saw to the file named by ``TEST_SERVER_RECORD_FILE`` (one line per
event, flushed at once), so tests can assert on what the server did, across restarts.
"""

from __future__ import annotations

import logging
import os
import sys

import anyio
from mcp import MCPError
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import INTERNAL_ERROR, INVALID_PARAMS, ToolAnnotations

logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
server = MCPServer("limits", log_level="WARNING")


def record(line: str) -> None:
    path = os.environ.get("TEST_SERVER_RECORD_FILE")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


def runs_of(tag: str) -> int:
    path = os.environ.get("TEST_SERVER_RECORD_FILE")
    if not path or not os.path.exists(path):
        return 0
    with open(path, encoding="utf-8") as f:
        return sum(1 for line in f if line.strip() == f"run {tag}")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def sleepy(tag: str, seconds: float) -> str:
    """Sleep, recording whether the sleep was cancelled."""
    record(f"start {tag}")
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        record(f"cancelled {tag}")
        raise
    record(f"finished {tag}")
    return f"slept {tag}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def wait(seconds: float, timeout_s: float | None = None) -> str:
    """Sleep; ``timeout_s`` is accepted like the shell's own limit."""
    await anyio.sleep(seconds)
    return f"waited {seconds:g}"


@server.tool(annotations=ToolAnnotations(idempotent_hint=True))
def crash_once_idempotent(tag: str) -> str:
    """Record a run; kill the whole server on the first run of ``tag``."""
    record(f"run {tag}")
    if runs_of(tag) == 1:
        os._exit(1)
    return f"done {tag}"


@server.tool()
def crash_once(tag: str) -> str:
    """The same, with no annotations, so it counts as side-effecting."""
    record(f"run {tag}")
    if runs_of(tag) == 1:
        os._exit(1)
    return f"done {tag}"


@server.tool(annotations=ToolAnnotations(idempotent_hint=True))
def crash_always(tag: str) -> str:
    """Record a run and kill the server every time."""
    record(f"run {tag}")
    os._exit(1)


@server.tool(annotations=ToolAnnotations(idempotent_hint=True))
def refuse(tag: str, protocol_code: int = 0) -> str:
    """Fail: with a JSON-RPC error when ``protocol_code`` is given, else as a tool error."""
    record(f"run {tag}")
    if protocol_code == INVALID_PARAMS:
        raise MCPError(code=INVALID_PARAMS, message="tag must name an existing ticket")
    if protocol_code:
        raise MCPError(code=INTERNAL_ERROR, message="database is locked")
    raise ToolError("no such ticket")


if __name__ == "__main__":
    server.run()
