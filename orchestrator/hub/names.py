"""Namespaced tool names that every model API accepts.

Anthropic and OpenAI both accept ``^[A-Za-z0-9_-]{1,64}$``. MCP allows dots, slashes and longer names,
so ``{server}__{tool}`` is sanitised and, when too long, shortened with a stable hash suffix so that
two long names never collapse into one.
"""

from __future__ import annotations

import hashlib
import re

MAX_TOOL_NAME = 64
BUILT_IN_SERVERS = frozenset({"fs", "shell", "memory", "loom", "subagents", "checkpoints", "mcp_access"})
"""Names only Loom's own servers may have: policy trusts what they are (a ``subagents`` tool only starts a child
that its own bounds hold), so a configured server may not take one of them, spelled any way that sanitises to it."""
DELEGATING_SERVER = "subagents"
"""The server whose tools start and drive child sessions."""
SEPARATOR = "__"
_INVALID = re.compile(r"[^A-Za-z0-9_-]")


def sanitize(part: str) -> str:
    """Replace characters model APIs reject with ``_``."""
    return _INVALID.sub("_", part) or "_"


def namespaced(server: str, tool: str, taken: set[str] | frozenset[str] = frozenset()) -> str:
    """The model-facing name of ``tool`` on ``server``, unique among ``taken``."""
    name = f"{sanitize(server)}{SEPARATOR}{sanitize(tool)}"
    if len(name) <= MAX_TOOL_NAME and name not in taken:
        return name
    digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()
    for width in range(6, len(digest) + 1):
        candidate = f"{name[: MAX_TOOL_NAME - width - 1]}_{digest[:width]}"
        if candidate not in taken:
            return candidate
    raise ValueError(f"cannot find a unique name for {server}/{tool}")  # pragma: no cover - 2**256 collisions


def server_of(name: str) -> str:
    """The (sanitised) server part of a namespaced name, or ``""`` if it has none."""
    head, sep, _ = name.partition(SEPARATOR)
    return head if sep else ""
