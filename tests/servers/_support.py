"""Helpers shared by the server tests: connecting over each transport and watching processes die."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent

from servers.shell._sandbox import bwrap_problem

REPO_ROOT = Path(__file__).resolve().parents[2]

BWRAP_PROBLEM = bwrap_problem()
"""Why the bwrap sandbox cannot run here, or None."""

SANDBOXES = [
    "off",
    pytest.param(
        "bwrap", marks=pytest.mark.skipif(BWRAP_PROBLEM is not None, reason=f"no bwrap sandbox: {BWRAP_PROBLEM}")
    ),
]
"""Shell sandbox modes to run a test under; bwrap is skipped, saying why, where it cannot run."""

IN_PROCESS_MODES = ["auto", "legacy"]
"""In-process connections: direct dispatch (2026-07-28) and memory streams with JSON-RPC (2025-11-25)."""


@asynccontextmanager
async def connect(transport: str, server: MCPServer, module: str, args: Sequence[str]) -> AsyncIterator[Client]:
    """Connect to a server in-process ("auto"/"legacy") or as ``python -m module args`` over stdio ("stdio")."""
    target: MCPServer | StdioServerParameters
    if transport == "stdio":
        # stdio children only inherit HOME/PATH/...; running from the repo root makes `servers` importable.
        target = StdioServerParameters(command=sys.executable, args=["-m", module, *args], cwd=str(REPO_ROOT))
        mode = "auto"
    else:
        target = server
        mode = transport
    async with Client(target, mode=mode) as client:
        yield client


def names_in(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


def text_of(result: CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


async def call_ok(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Call a tool that must succeed and return its structured content."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, text_of(result)
    content: dict[str, Any] | None = result.structured_content
    assert content is not None
    return content


async def call_ok_text(client: Client, tool: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """Call a tool that must succeed and return its structured content and the one text block the model reads."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, text_of(result)
    assert len(result.content) == 1, result.content
    content: dict[str, Any] | None = result.structured_content
    assert content is not None
    return content, text_of(result)


async def call_error(client: Client, tool: str, arguments: dict[str, Any]) -> str:
    """Call a tool that must fail and return the error text the model would read."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    return text_of(result)


def process_running(pid: int) -> bool:
    """Whether pid is a live process; a zombie counts as dead (the container's init may never reap orphans)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] not in "ZX"


async def wait_until_gone(pid: int, timeout_s: float = 10) -> None:
    with anyio.fail_after(timeout_s):
        while True:
            if not process_running(pid):
                return
            await anyio.sleep(0.05)


async def wait_for_pid(pidfile: Path, timeout_s: float = 10) -> int:
    """Wait until a command has written a pid into pidfile, and return it."""
    with anyio.fail_after(timeout_s):
        while True:
            text = await anyio.Path(pidfile).read_text() if await anyio.Path(pidfile).exists() else ""
            if text.endswith("\n"):
                return int(text)
            await anyio.sleep(0.02)
