"""Who is calling the face: the name recorded as ``decided_by`` / ``answered_by`` for what a client decides."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp.server.mcpserver import Context

from orchestrator.protocol import DRIVING_CLIENT_META


def caller_name(meta: Mapping[str, Any] | None, session: object) -> str:
    """``mcp:NAME`` of the client behind a request, or ``mcp-client`` when it gives none.

    Through ``loom mcp`` attached to the daemon the connected client is ``loom mcp`` itself; it names the client
    it relays for in the request's ``_meta``, and that name wins. Otherwise it is the connection's ``clientInfo``.
    The name is the client's own claim, cut to 200 characters: it says who, it proves nothing.
    """
    relayed = (meta or {}).get(DRIVING_CLIENT_META)
    params = getattr(session, "client_params", None)
    info = getattr(params, "client_info", None)
    name = relayed if isinstance(relayed, str) and relayed else getattr(info, "name", None)
    return f"mcp:{name[:200]}" if isinstance(name, str) and name else "mcp-client"


def client_of(ctx: Context) -> str:
    """:func:`caller_name` of a tool call's context."""
    return caller_name(ctx.request_context.meta, ctx.session)
