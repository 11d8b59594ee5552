"""What the relay reads in and adds to a JSON-RPC message, without any I/O: eras, headers, bounds, ``_meta``.

:mod:`clients.relay.relay` decides with these where a message goes and how long it may take; they hold
the few MCP wire facts the relay needs, written out here because the SDK that knows them is not imported.
"""

from __future__ import annotations

import base64
import json
import math
from typing import Any

DRIVING_CLIENT_META = "loom/driving-client"
"""As :data:`orchestrator.protocol.DRIVING_CLIENT_META` (which needs pydantic to import); a test keeps them equal."""
VERSION_META = "io.modelcontextprotocol/protocolVersion"
CLIENT_INFO_META = "io.modelcontextprotocol/clientInfo"
CLIENT_CAPABILITIES_META = "io.modelcontextprotocol/clientCapabilities"
NAME_PARAMS = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    # The tasks extension (SEP-2663) names the task a request is about, as the core methods name their target.
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}
"""Methods whose 2026-07-28 POST names its target in ``Mcp-Name``, and the parameter that holds it."""
READ_TIMEOUT_S = 300.0
"""No call waits longer (the face's longest long-poll is 60 s)."""

Message = dict[str, Any]


def version_of(message: Message) -> str | None:
    """The protocol version a 2026-07-28 request carries in its ``_meta``; None for the 2025 era."""
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    version = meta.get(VERSION_META) if isinstance(meta, dict) else None
    return version if isinstance(version, str) and message.get("method") != "initialize" else None


def client_name(info: object) -> str:
    """The ``name`` of a ``clientInfo`` object, or ``""``."""
    name = info.get("name") if isinstance(info, dict) else None
    return name if isinstance(name, str) else ""


def modern_headers(message: Message, version: str) -> dict[str, str]:
    """The routing headers of a 2026-07-28 POST: version, method, and the target's name where it has one."""
    method = str(message.get("method"))
    headers = {"Mcp-Protocol-Version": version, "Mcp-Method": method}
    params = message.get("params")
    target = params.get(NAME_PARAMS.get(method, "")) if isinstance(params, dict) else None
    if isinstance(target, str):
        headers["Mcp-Name"] = header_value(target)
    return headers


def header_value(value: str) -> str:
    """``value`` as an HTTP header carries it: as it is, or base64 in the SDK's sentinel if it would not survive."""
    if value.isascii() and value.isprintable() and value == value.strip() and not value.startswith("=?base64?"):
        return value
    return f"=?base64?{base64.b64encode(value.encode()).decode('ascii')}?="


def with_driving_client(message: Message, driving: str) -> Message:
    """A copy of ``message`` whose ``_meta`` names ``driving`` as the client driving ``loom mcp``."""
    if not driving:
        return message
    params = message.get("params")
    params = params if isinstance(params, dict) else {}
    meta = params.get("_meta")
    meta = {**meta} if isinstance(meta, dict) else {}
    meta[DRIVING_CLIENT_META] = driving
    return {**message, "params": {**params, "_meta": meta}}


def call_bound(message: Message, margin_s: float) -> float | None:
    """How long a request may take: a tool's ``wait_s`` plus ``margin_s``; None for a listen stream."""
    method = message.get("method")
    if method == "subscriptions/listen":
        return None  # a stream that lasts as long as the caller wants it
    if method != "tools/call":
        return margin_s
    params = message.get("params")
    arguments = params.get("arguments") if isinstance(params, dict) else None
    wait_s = arguments.get("wait_s") if isinstance(arguments, dict) else None
    waits = 0.0
    if isinstance(wait_s, int | float) and not isinstance(wait_s, bool) and math.isfinite(wait_s):
        waits = max(float(wait_s), 0.0)
    return min(waits + margin_s, READ_TIMEOUT_S)


def cancelled(request_id: Any, reason: str) -> Message:
    """A 2025-era ``notifications/cancelled`` for ``request_id``."""
    return {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": request_id, "reason": reason},
    }


def id_key(request_id: object) -> str:
    """A dictionary key for a JSON-RPC id (1 and ``"1"`` are different ids)."""
    return json.dumps(request_id)
