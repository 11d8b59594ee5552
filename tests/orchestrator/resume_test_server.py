"""An external MCP server for the resume tests, run over stdio, that counts executions.

Each tool records ``run TAG`` when it starts and ``done TAG`` when it ends, in the file named by
``RESUME_RECORD_FILE`` (flushed at once, so the count survives any process being killed). With
``hold`` the first execution of a tag blocks for a minute, so a test can interrupt Loom mid-call;
a later execution of the same tag returns at once.
"""

from __future__ import annotations

import logging
import os
import sys

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
server = MCPServer("resume", log_level="WARNING")


def _lines() -> list[str]:
    path = os.environ["RESUME_RECORD_FILE"]
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


def _record(line: str) -> None:
    with open(os.environ["RESUME_RECORD_FILE"], "a", encoding="utf-8") as f:
        f.write(line + "\n")


async def _act(kind: str, tag: str, hold: bool) -> str:
    first = f"run {tag}" not in _lines()
    _record(f"run {tag}")
    if hold and first:
        await anyio.sleep(60)
    _record(f"done {tag}")
    return f"{kind} {tag} ok"


@server.tool()
async def charge(tag: str, hold: bool = False) -> str:
    """A side effect (no annotations): charging twice would be a bug."""
    return await _act("charged", tag, hold)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def lookup(tag: str, hold: bool = False) -> str:
    """Read-only: safe to run again."""
    return await _act("looked up", tag, hold)


@server.tool(annotations=ToolAnnotations(idempotent_hint=True))
async def put(tag: str, hold: bool = False) -> str:
    """Idempotent: running it again has the same effect as once."""
    return await _act("put", tag, hold)


if __name__ == "__main__":
    server.run()
