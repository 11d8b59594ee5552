"""A stdio MCP server that counts its executions, for the crash tests.

Every call appends one JSON line ``{"tool", "key", "pid", "t"}`` to the file named by
``COUNTING_SERVER_RECORD_FILE`` and fsyncs it *before* doing anything else, so a line on disk means
the call really ran, even if the daemon that asked for it is killed the next instant. ``delay_s``
then holds the call open, widening the window in which a kill lands between the effect and its
result being stored.

Three kinds of tool, as the runtime sees them:

* ``read_state`` (read-only): how many executions the file holds;
* ``put`` (idempotent): set a key, safe to repeat;
* ``append_entry`` (no hints, so side-effecting): must never run twice for one ``key``.

Extra command-line arguments are ignored; tests pass a unique marker there to find the process.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

RECORD_ENV = "COUNTING_SERVER_RECORD_FILE"

logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
server = MCPServer("counter", log_level="WARNING")


def record(tool: str, key: str) -> None:
    """Append one execution line and fsync it."""
    line = json.dumps({"tool": tool, "key": key, "pid": os.getpid(), "t": time.time()}) + "\n"
    fd = os.open(os.environ[RECORD_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def executions(path: Path) -> list[dict[str, Any]]:
    """Every execution recorded in ``path`` (for the tests), oldest first."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def read_state(key: str, delay_s: float = 0.0) -> str:
    """How many executions have been recorded so far."""
    record("read_state", key)
    await anyio.sleep(delay_s)
    return f"{len(executions(Path(os.environ[RECORD_ENV])))} executions recorded"


@server.tool(annotations=ToolAnnotations(idempotent_hint=True))
async def put(key: str, value: str, delay_s: float = 0.0) -> str:
    """Set ``key`` to ``value`` (repeating it changes nothing)."""
    record("put", key)
    await anyio.sleep(delay_s)
    return f"{key} = {value}"


@server.tool()
async def append_entry(key: str, text: str, delay_s: float = 0.0) -> str:
    """Append an entry: a side effect that must happen at most once per ``key``."""
    record("append_entry", key)
    await anyio.sleep(delay_s)
    return f"appended {key}"


if __name__ == "__main__":
    server.run()
