"""How long one tool call may run before the hub cancels it.

The most specific setting wins:

1. ``toolTimeouts`` at the top level of the config (or ``Hub(timeouts=...)``) by namespaced tool
   name, e.g. ``"fs__grep": 30``;
2. ``toolTimeouts`` inside an ``mcpServers`` entry, by the server's own tool name;
3. top-level ``toolTimeouts`` by server name, e.g. ``"shell": 600``;
4. ``timeout`` inside the ``mcpServers`` entry;
5. :data:`~orchestrator.config.DEFAULT_CALL_TIMEOUT_S`.

A tool that takes its own ``timeout_s`` argument (the shell's ``run``) always gets at least that
long plus :data:`ARGUMENT_GRACE_S`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.config import DEFAULT_CALL_TIMEOUT_S, ServerConfig

ARGUMENT_GRACE_S = 5.0
"""Extra seconds on top of a call's own ``timeout_s`` before the hub gives up on it."""
MAX_ARGUMENT_TIMEOUT_S = 3600.0
"""The most a ``timeout_s`` argument can stretch a call's limit (the shell's own maximum)."""


def configured_timeout(
    overrides: Mapping[str, float],
    *,
    name: str,
    server: str,
    remote_name: str,
    server_config: ServerConfig | None,
) -> float:
    """The configured limit for one tool, by the precedence in this module's docstring.

    Args:
        overrides: Top-level ``toolTimeouts``, keyed by namespaced tool name or server name.
        name: The namespaced tool name.
        server: The server's name.
        remote_name: The tool's name on its server.
        server_config: The server's ``mcpServers`` entry; ``None`` for Loom's built-in servers.
    """
    if name in overrides:
        return overrides[name]
    if server_config is not None and remote_name in server_config.tool_timeouts_s:
        return server_config.tool_timeouts_s[remote_name]
    if server in overrides:
        return overrides[server]
    return server_config.call_timeout_s if server_config is not None else DEFAULT_CALL_TIMEOUT_S


def takes_timeout(input_schema: Mapping[str, Any]) -> bool:
    """Whether a tool declares its own ``timeout_s`` argument."""
    properties = input_schema.get("properties")
    return isinstance(properties, dict) and "timeout_s" in properties


def call_timeout(configured: float, input_schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> float:
    """The limit for one call: ``configured``, stretched to cover a ``timeout_s`` the model asked for.

    A tool such as the shell's ``run`` enforces ``timeout_s`` itself: it kills the command, waits a
    grace period for it to die, and returns the partial output with ``timed_out=true``. That answer
    is worth far more to the model than the hub's bare cancellation, so the hub must not cut in
    first; it waits ``timeout_s`` plus :data:`ARGUMENT_GRACE_S` (the shell's kill grace and pipe
    drain plus the reply). Only a ``timeout_s`` that the tool's schema declares counts, so a model
    cannot stretch the limit of a tool that ignores the argument, and the stretch stops at
    :data:`MAX_ARGUMENT_TIMEOUT_S` so an external tool without bounds cannot hang a run forever.
    """
    asked = arguments.get("timeout_s")
    if not takes_timeout(input_schema) or isinstance(asked, bool) or not isinstance(asked, int | float):
        return configured
    return max(configured, min(float(asked), MAX_ARGUMENT_TIMEOUT_S) + ARGUMENT_GRACE_S)
