"""A small external MCP server for hub tests, run as a real subprocess over stdio.

Behaviour is chosen by environment variables so one file covers every case:
``TEST_SERVER_CRASH_ON_START`` exits before speaking MCP; ``TEST_SERVER_COUNT_FILE`` appends one
line per ``touch`` call so tests can count executions across restarts.
"""

from __future__ import annotations

import logging
import os
import sys

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

if os.environ.get("TEST_SERVER_CRASH_ON_START"):
    sys.stderr.write("boom: this server is configured to crash on start\n")
    sys.stderr.flush()
    sys.exit(3)

logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
server = MCPServer("ext", log_level="WARNING")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def echo(text: str, times: int = 1) -> str:
    """Echo text back."""
    return text * times


@server.tool(name="weird.name/with spaces")
def weird() -> str:
    """A tool whose name model APIs would reject."""
    return "weird ok"


@server.tool()
def touch(tag: str) -> str:
    """Record one execution."""
    path = os.environ.get("TEST_SERVER_COUNT_FILE")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(tag + "\n")
    return f"touched {tag}"


@server.tool()
def touch_then_die(tag: str) -> str:
    """Record one execution, then die before answering: the effect happened, the caller never hears of it."""
    touch(tag)
    os._exit(1)


@server.tool()
def die() -> str:
    """Kill the server process in the middle of a call."""
    os._exit(1)


if __name__ == "__main__":
    server.run()
