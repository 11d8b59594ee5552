"""An external MCP server for the supervisor's tests, run as a real subprocess.

``python supervised_test_server.py stdio`` serves over stdio; ``... http PORT`` over streamable HTTP and
``... sse PORT`` over the legacy HTTP+SSE transport, both under uvicorn on 127.0.0.1. Its tools: ``echo``;
``pid`` (which process answers, to tell a restart); ``wedge`` (blocks the server's event loop for
``TEST_WEDGE_S`` seconds, so it answers nothing, pings included: a wedged server); ``grow`` (adds a tool and
announces the change, in whichever era the caller speaks).
"""

from __future__ import annotations

import functools
import os
import sys
import time

from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("supervised", log_level="WARNING")
low = server._lowlevel_server  # handshake-era clients are told list changes are announced (no public accessor)
low.create_initialization_options = functools.partial(  # type: ignore[method-assign]
    low.create_initialization_options, NotificationOptions(tools_changed=True)
)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def echo(text: str) -> str:
    """Echo text back."""
    return text


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def pid() -> int:
    """The process id of the server."""
    return os.getpid()


@server.tool()
async def wedge() -> str:
    """Block the whole server (its event loop) for a while: nothing is answered meanwhile."""
    time.sleep(float(os.environ.get("TEST_WEDGE_S", "3600")))  # noqa: ASYNC251 - blocking the loop is the point
    return "unwedged"


@server.tool()
async def grow(name: str, ctx: Context) -> str:
    """Add a tool called ``name`` and announce that the tool list changed."""

    def added() -> str:
        return f"{name} was added"

    server.add_tool(added, name=name, description=f"A tool added at run time: {name}.")
    await ctx.notify_tools_changed()  # 2026-07-28: to subscriptions/listen streams
    if ctx.protocol_version != "2026-07-28":
        await ctx.session.send_tool_list_changed()  # handshake era: a plain notification
    return f"added {name}"


if __name__ == "__main__":
    sys.stderr.write(f"supervised test server {os.getpid()} up\n")
    sys.stderr.flush()
    kind = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if kind == "stdio":
        server.run()
    elif kind == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("sse", host="127.0.0.1", port=int(sys.argv[2]))
