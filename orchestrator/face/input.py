r"""Checks on what a client sends the face before any of it reaches the runtime.

JSON may carry ``\ud800`` escapes that decode to lone surrogates: not text, and refused by every
encoder downstream (SQLite, the model APIs, the next JSON response). A directory path may be longer
than any file system accepts. Both used to surface as a bare "Error executing tool" with a traceback
in the daemon's log; here they become an error result that says what was wrong and what to send.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

__all__ = ["CheckedServer", "check_directory", "lone_surrogate"]

MAX_PATH_CHARS = 4096
"""Longest directory path accepted, Linux's ``PATH_MAX``."""
MAX_NAME_BYTES = 255
"""Longest single path component accepted, Linux's ``NAME_MAX``."""

_SURROGATE = re.compile("[\ud800-\udfff]")


def lone_surrogate(value: Any, where: str = "") -> str | None:
    """Where in ``value`` (parsed JSON) a lone surrogate is, as ``"arguments.cwd (U+D800)"``, or None."""
    if isinstance(value, str):
        found = _SURROGATE.search(value) if not value.isascii() else None
        return f"{where or 'a string'} (U+{ord(found.group()):04X})" if found else None
    if isinstance(value, Mapping):
        for key, item in value.items():
            here = f"{where}.{key}" if where else str(key)
            problem = lone_surrogate(str(key), here) or lone_surrogate(item, here)
            if problem:
                return problem
    if isinstance(value, list):
        for index, item in enumerate(value):
            problem = lone_surrogate(item, f"{where}[{index}]")
            if problem:
                return problem
    return None


def check_directory(raw: str) -> None:
    """Refuse a working-directory path no file system could hold, saying why.

    Raises:
        ToolError: empty, NUL, too long, a component too long.
    """
    if not raw.strip():
        raise ToolError("cwd is empty; pass the absolute path of an existing directory")
    if "\x00" in raw:
        raise ToolError("cwd contains a NUL byte, which no path can contain; pass an existing directory")
    if len(raw) > MAX_PATH_CHARS:
        raise ToolError(f"cwd is {len(raw):,} characters long; paths are at most {MAX_PATH_CHARS:,}")
    longest = max(os.fsencode(raw).split(b"/"), key=len)
    if len(longest) > MAX_NAME_BYTES:
        raise ToolError(f"cwd has a component of {len(longest):,} bytes; file names are at most {MAX_NAME_BYTES} bytes")


class CheckedServer(MCPServer):
    """An MCP server that refuses tool arguments holding lone surrogates before any tool sees them."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Context[Any] | None = None) -> Any:
        """Call a tool, unless its arguments are not valid text (an error result then says which one)."""
        problem = lone_surrogate(arguments)
        if problem is not None:
            raise ToolError(
                f"argument {problem} holds a lone surrogate, which is not text; send valid Unicode (UTF-8) text"
            )
        return await super().call_tool(name, arguments, context)
