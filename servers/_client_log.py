"""Log messages to the client (MCP ``notifications/message``) where the connection's era has them.

Handshake-era clients (2025-11-25 and before) declare nothing and set a level with ``logging/setLevel``; the
server declares the ``logging`` capability by serving that method, and sends messages at or above the level the
client set (``info`` until it sets one). 2026-07-28 removed ``logging/setLevel``: a client opts in per request
(``_meta`` log level) and the SDK drops what it did not ask for, so the level kept here does not apply there.

`MCPServer` serves no ``logging/setLevel`` in SDK 2.3, so `install` registers one on its low-level server (no
public accessor exists); the level is kept in the connection's ``state`` (one per client connection, reached
through the request's session, again without a public accessor: both are read defensively, and logging to the
client is best-effort, so an SDK change degrades to "no client logs", never to a failed call).
"""

from __future__ import annotations

import logging
import warnings
from typing import Any, Final, get_args

from mcp import MCPDeprecationWarning
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.session import ServerSession
from mcp.types import EmptyResult, LoggingLevel, SetLevelRequestParams
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

__all__ = ["DEFAULT_LEVEL", "RefusalLog", "install", "is_error", "send"]

logger = logging.getLogger(__name__)

LEVELS: Final[tuple[LoggingLevel, ...]] = get_args(LoggingLevel)
"""RFC 5424 severities, least severe first (the SDK's own order)."""

DEFAULT_LEVEL: Final[LoggingLevel] = "info"
"""What a handshake-era client gets before it sets a level."""

_STATE_KEY: Final = "loom.client_log_level"


def install(server: MCPServer) -> None:
    """Serve ``logging/setLevel`` on ``server``, which declares the ``logging`` capability (microseconds)."""
    lowlevel = getattr(server, "_lowlevel_server", None)
    if lowlevel is not None:
        lowlevel.add_request_handler("logging/setLevel", SetLevelRequestParams, _set_level)


async def _set_level(ctx: ServerRequestContext[Any, Any], params: SetLevelRequestParams) -> EmptyResult:
    state = _state(ctx.session)
    if state is not None:
        state[_STATE_KEY] = params.level
    return EmptyResult()


def _state(session: ServerSession) -> dict[str, Any] | None:
    connection = getattr(session, "_connection", None)
    state = getattr(connection, "state", None)
    return state if isinstance(state, dict) else None


def level_of(session: ServerSession) -> LoggingLevel:
    """The level a handshake-era client set on this connection (`DEFAULT_LEVEL` if none)."""
    state = _state(session)
    level = state.get(_STATE_KEY) if state is not None else None
    return level if level in LEVELS else DEFAULT_LEVEL


async def send(session: ServerSession, level: LoggingLevel, message: str, *, name: str, request_id: Any = None) -> None:
    """Send ``message`` to the client if its era and level take it; never raises.

    Args:
        session: The request's session (``ctx.session`` of a handler, ``ctx.request_context.session`` of a tool).
        level: The message's severity.
        message: Plain text a person reads.
        name: The logger name shown to the client (the server's name).
        request_id: The request this is about: the message rides that request's stream.
    """
    if session.protocol_version not in MODERN_PROTOCOL_VERSIONS and LEVELS.index(level) < LEVELS.index(
        level_of(session)
    ):
        return
    try:
        with warnings.catch_warnings():
            # Deprecated by 2026-07-28, still the spec of the era this is sent in (the SDK filters the rest).
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await session.send_log_message(level, message, logger=name, related_request_id=request_id)
    except Exception:  # a log line must never fail the call it is about (a closed stream, a gone client)
        logger.debug("could not send a log message to the client", exc_info=True)


class RefusalLog:
    """Server middleware: a tool call that ends in an error is also a ``warning`` to the client's log.

    What a server refuses (a path outside the roots, a note that is not there) is what a person watching the
    client's log wants to see, beside the error the model reads. One object per server; microseconds a call.

    Args:
        name: The logger name the client sees (the server's name).
    """

    leaves_tool_listing = True
    """Tool listings and ``server/discover`` pass through untouched, so the hub may reuse them (hub/transports.py)."""

    def __init__(self, name: str) -> None:
        self.name = name

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """Pass the request on; log a tool call's error result."""
        result = await call_next(ctx)
        if ctx.method == "tools/call" and is_error(result):
            tool = (ctx.params or {}).get("name", "?")
            await send(ctx.session, "warning", f"{tool}: {_text(result)}", name=self.name, request_id=ctx.request_id)
        return result


def is_error(result: HandlerResult) -> bool:
    """Whether a ``tools/call`` handler's result is an error result (model or wire dict)."""
    if isinstance(result, dict):
        return bool(result.get("isError"))
    return bool(getattr(result, "is_error", False))


def _text(result: HandlerResult) -> str:
    content = result.get("content") if isinstance(result, dict) else getattr(result, "content", None)
    parts = []
    for block in content or ():
        text = block.get("text") if isinstance(block, dict) else getattr(block, "text", None)
        if isinstance(text, str):
            parts.append(text)
    return " ".join(parts) or "failed"
