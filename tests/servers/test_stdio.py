"""The stdio wire Loom's servers and ``loom mcp`` share: whole messages both ways, nothing stray on it."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[2]

SERVER = textwrap.dedent(
    """
    import subprocess, sys
    from mcp.server.mcpserver import MCPServer
    from servers._stdio import serve_stdio

    def build() -> MCPServer:
        server = MCPServer("wire")

        @server.tool()
        def echo(text: str) -> str:
            return text

        @server.tool()
        def blob(size: int) -> str:
            return "".join(chr(0x41 + i % 26) for i in range(size))

        @server.tool()
        def stray() -> str:
            # What a careless tool or its child does: write to "stdout", which must not reach the wire.
            print("stray line from the tool", flush=True)
            subprocess.run(["sh", "-c", "echo stray line from a child; cat"], check=True, timeout=10)
            return "ok"

        return server

    sys.exit(serve_stdio("wire", build))
    """
)


def _params(tmp_path: Path) -> StdioServerParameters:
    script = tmp_path / "wire_server.py"
    script.write_text(SERVER, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    return StdioServerParameters(command=sys.executable, args=[str(script)], env=env)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_messages_larger_than_a_pipe_buffer_arrive_whole_both_ways(tmp_path: Path, mode: str) -> None:
    sent = "é" * 150_000 + "\u2028 end"  # 300 KB of UTF-8: read and written in many pieces, split inside characters
    with anyio.fail_after(30):  # a message cut or run together would leave its call waiting
        async with Client(_params(tmp_path), mode=mode) as client:
            echoed = await client.call_tool("echo", {"text": sent})
            big = await client.call_tool("blob", {"size": 500_000})
    assert not echoed.is_error and echoed.structured_content == {"result": sent}
    assert not big.is_error and big.structured_content is not None
    expected = "".join(chr(0x41 + i % 26) for i in range(500_000))
    assert big.structured_content["result"] == expected


async def test_a_tool_and_its_children_cannot_write_onto_the_wire_or_read_from_it(tmp_path: Path) -> None:
    with anyio.fail_after(30):
        async with Client(_params(tmp_path)) as client:
            first = await client.call_tool("stray")  # the child's `cat` reads EOF at once instead of the wire
            after = await client.call_tool("echo", {"text": "still in step"})
    assert not first.is_error and first.structured_content == {"result": "ok"}
    assert after.structured_content == {"result": "still in step"}
