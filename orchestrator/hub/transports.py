"""How the hub reaches one MCP server: in-process, a stdio child process, or streamable HTTP.

Opening a connection is the transport's business; keeping it alive, restarting it and calling tools
over it is the hub's (:mod:`orchestrator.hub.pool`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, TextIO

from mcp import Client, StdioServerParameters
from mcp import types as mt
from mcp.server.mcpserver import MCPServer

from orchestrator.config import ServerConfig


def open_errlog(
    name: str, target: MCPServer | ServerConfig, log_dir: Path | None, files: contextlib.ExitStack
) -> TextIO | None:
    """The file a stdio server's stderr is appended to (``LOG_DIR/NAME.log``), or None for other servers."""
    if not isinstance(target, ServerConfig) or target.transport != "stdio" or log_dir is None:
        return None
    # Private: a server's stderr may hold what its tools read.
    log_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = log_dir / f"{name}.log"
    # Opened by path (the tail of a failed start is read back through ``.name``), created 0600, no symlink followed.
    private = open(path, "a+", encoding="utf-8", opener=lambda p, flags: os.open(p, flags | os.O_NOFOLLOW, 0o600))
    return files.enter_context(private)


def open_client(target: MCPServer | ServerConfig, errlog: TextIO | None) -> Client:
    """An unopened ``Client`` for ``target``; entering it starts the server (stdio) or connects."""
    if isinstance(target, MCPServer):
        return Client(target)
    if target.transport == "stdio":
        from mcp.client.stdio import stdio_client

        params = StdioServerParameters(
            command=target.command, args=list(target.args), env=target.env or None, cwd=target.cwd
        )
        return Client(stdio_client(params, errlog=errlog) if errlog is not None else params)
    return Client(_http_transport(target))


async def list_all_tools(client: Client) -> list[mt.Tool]:
    """Every tool a server offers, following pagination (at most 100 pages)."""
    tools: list[mt.Tool] = []
    cursor: str | None = None
    for _ in range(100):  # a server that pages forever must not hang start-up
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


@contextlib.asynccontextmanager
async def _http_transport(cfg: ServerConfig) -> AsyncIterator[Any]:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    # No read timeout: each call's own limit (an anyio deadline in the hub) governs how long it may
    # run, and per-tool limits may exceed the server's; connecting is bounded by the start-up limit.
    timeout = httpx2.Timeout(cfg.startup_timeout_s, read=None)
    async with httpx2.AsyncClient(headers=cfg.headers, timeout=timeout) as http:
        async with streamable_http_client(cfg.url, http_client=http) as streams:
            yield streams


def stderr_tail(errlog: TextIO | None, offset: int) -> str:
    """The end of what a stdio server wrote to stderr since ``offset``, to quote in its failure."""
    if errlog is None:
        return ""
    try:
        errlog.flush()
        with open(errlog.name, encoding="utf-8", errors="replace") as f:
            f.seek(offset)
            tail = f.read()[-600:].strip()
    except OSError:
        return ""
    return f"; its stderr ends with: {tail}" if tail else ""
