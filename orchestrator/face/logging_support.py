"""The face's log to its client (MCP logging), for clients of the eras that have it.

Handshake eras: the face declares ``logging`` and serves ``logging/setLevel`` (:func:`servers._client_log.install`,
the same as Loom's fs and memory servers); messages below the level the client set (``info`` until it sets one)
are not sent. 2026-07-28 removed ``logging/setLevel``: a request opts in with the ``_meta`` log level, and the SDK
sends a message only on that request's own stream at that level and above.

What is logged, about each ``tools/call`` as it answers: an error result as a ``warning`` (what was refused and
why, beside the error the caller reads); a call that changes something (anything but ``list_*``, ``get_*`` and
``read_*``) as ``info`` naming what it made or touched (session, run, approval, status); a read as ``debug``.
One middleware object per face; a request that is not a tool call costs one comparison.
"""

from __future__ import annotations

from typing import Any, Final

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.types import LoggingLevel

from servers import _client_log

__all__ = ["FaceLog", "install"]

_READS: Final = ("list_", "get_", "read_")
_NAMED: Final = ("session_id", "run_id", "approval_id", "status", "mode", "decision")
"""The fields of a result that name what a call made or touched, in the order a log line gives them."""


def install(face: MCPServer) -> None:
    """Serve ``logging/setLevel`` on ``face`` (which then declares the ``logging`` capability)."""
    _client_log.install(face)


class FaceLog:
    """Server middleware: each tool call's outcome as a log message to the client that made it.

    Args:
        name: The logger name the client sees.
    """

    leaves_tool_listing = True
    """Tool listings pass through untouched (hub/transports.py reuses them)."""

    def __init__(self, name: str) -> None:
        self.name = name

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """Pass the request on; log a tool call's outcome."""
        result = await call_next(ctx)
        if ctx.method == "tools/call" and isinstance(result, dict):
            tool = str((ctx.params or {}).get("name", "?"))
            level, line = _line(tool, result)
            await _client_log.send(ctx.session, level, line, name=self.name, request_id=ctx.request_id)
        return result


def _line(tool: str, result: dict[str, Any]) -> tuple[LoggingLevel, str]:
    if result.get("isError"):
        texts = [b.get("text", "") for b in result.get("content") or () if isinstance(b, dict)]
        said = " ".join(t for t in texts if t).removeprefix(f"Error executing tool {tool}: ")  # the SDK's prefix
        return "warning", f"{tool} refused: {said or 'failed'}"
    structured = result.get("structuredContent")
    named = structured if isinstance(structured, dict) else {}
    facts = ", ".join(f"{key} {named[key]}" for key in _NAMED if isinstance(named.get(key), str) and named[key])
    level: LoggingLevel = "debug" if tool.startswith(_READS) else "info"
    return level, f"{tool}: {facts}" if facts else f"{tool}: done"
