"""An external MCP server with resources, a resource template and prompts, run as a real subprocess over stdio.

``TEST_SERVER_NAME`` names it (two copies play two servers); ``TEST_SERVER_SECRET`` is the text of its
``docs://secret`` resource, which a session that may not see this server must never read. ``TEST_SERVER_BARE``
serves one tool and nothing else, declaring neither resources nor prompts (as a low-level server does).
"""

from __future__ import annotations

import logging
import os
import sys

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.prompts.base import AssistantMessage, UserMessage
from mcp.types import ToolAnnotations

logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
NAME = os.environ.get("TEST_SERVER_NAME", "docs")
server = MCPServer(NAME, log_level="WARNING")
HUGE_CHARS = 2_000_000
# A 1x1 PNG.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d49444154789c6300010000000500010d0a2db40000000049454e44ae426082"
)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def ping() -> str:
    """Answer pong."""
    return "pong"


@server.resource("docs://readme", name="readme", description="How to use the docs", mime_type="text/markdown")
def readme() -> str:
    return f"# {NAME}\nThe readme of {NAME}."


@server.resource("docs://secret", name="secret", mime_type="text/plain")
def secret() -> str:
    return os.environ.get("TEST_SERVER_SECRET", "no secret")


@server.resource("docs://huge", name="huge", description="Two million characters", mime_type="text/plain")
def huge() -> str:
    return "head " + "x" * (HUGE_CHARS - 10) + " tail"


@server.resource("docs://logo.png", name="logo", mime_type="image/png")
def logo() -> bytes:
    return PNG


@server.resource("docs://archive.bin", name="archive", mime_type="application/octet-stream")
def archive() -> bytes:
    return b"\x00\x01" * 1000


@server.resource("notes://{key}", name="note", description="A note by key", mime_type="text/plain")
def note(key: str) -> str:
    return f"note {key} of {NAME}"


@server.prompt(description="Review a piece of code")
def review(code: str, focus: str = "bugs") -> list[UserMessage | AssistantMessage]:
    return [
        UserMessage(f"Review this code for {focus}:\n{code}"),
        AssistantMessage("I will look for bugs first."),
    ]


async def bare() -> None:
    import mcp.types as mt
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    async def tools(
        _ctx: ServerRequestContext[object], _params: mt.PaginatedRequestParams | None
    ) -> mt.ListToolsResult:
        return mt.ListToolsResult(tools=[mt.Tool(name="ping", input_schema={"type": "object"})])

    async def call(_ctx: ServerRequestContext[object], _params: mt.CallToolRequestParams) -> mt.CallToolResult:
        return mt.CallToolResult(content=[mt.TextContent(type="text", text="pong")])

    low: Server[object] = Server(NAME, on_list_tools=tools, on_call_tool=call)
    async with stdio_server() as (read, write):
        await low.run(read, write, low.create_initialization_options())


if __name__ == "__main__":
    if os.environ.get("TEST_SERVER_BARE"):
        import anyio

        anyio.run(bare)
    else:
        server.run("stdio")
