"""A client of Loom's face in this process, for the subagents server a session's hub holds.

A session's ``subagents`` tools drive the orchestrator through its own face, as a standalone server does over
HTTP: the in-memory MCP transport carries the same calls, so a child started from inside is what a child started
by any client is (a session in the store, bounded by the host, visible on its parent's stream).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

from clients.loom import LoomClient
from servers._version import loom_version

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from servers.subagents._server import Connect

__all__ = ["CLIENT_NAME", "in_process"]

CLIENT_NAME = "loom-subagents"
"""The ``clientInfo`` name the face records for calls a session's subagents tools make."""


def in_process(face: Callable[[], MCPServer], *, tasks: bool = False) -> Connect:
    """Opens clients of the face ``face()`` returns (built once by the host, on first use).

    ``tasks``: the clients declare the tasks extension (the face then answers send_message with a task).
    """

    @contextlib.asynccontextmanager
    async def connect() -> AsyncIterator[LoomClient]:
        from mcp import Client
        from mcp import types as mt

        info = mt.Implementation(name=CLIENT_NAME, version=loom_version())
        from servers.subagents._tasks import TaskResults

        async with Client(face(), client_info=info, extensions=[TaskResults()] if tasks else None) as session:
            yield LoomClient(session, on_daemon=False)

    return connect
