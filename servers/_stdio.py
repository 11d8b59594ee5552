"""The stdio entry shared by Loom's servers: logging off stdout, build, serve, exit codes."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable

import anyio
from mcp.server.mcpserver import MCPServer


def serve_stdio(name: str, build: Callable[[], MCPServer]) -> int:
    """Build a server and serve it over stdio until the client disconnects.

    Returns:
        0 after a clean end, 2 when ``build`` rejects its arguments (ValueError), 130 on Ctrl-C.
    """
    # Before MCPServer exists: its basicConfig call is then a no-op, and stdout stays reserved for the wire.
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format=f"{name}: %(levelname)s %(name)s: %(message)s")
    try:
        server = build()
    except ValueError as exc:
        print(f"loom server {name}: {exc}", file=sys.stderr)
        return 2
    try:
        anyio.run(server.run_stdio_async)
    except KeyboardInterrupt:
        return 130
    return 0
