"""Claude Code's tool names and argument shapes, so that a hook written for Claude Code works unchanged.

Loom's tools are namespaced (``shell__run``, ``fs__write``); a Claude Code hook matches ``Bash`` or ``Write`` and
reads ``tool_input.command`` or ``tool_input.file_path``. A matcher is therefore tried against a tool's Loom name,
its Claude Code name (the built-in tools :mod:`orchestrator.agents.claude` maps) and, for an external server's
tool, ``mcp__SERVER__TOOL``. A hook that matched by a Claude name (or matches every tool) is given the Claude
name and the Claude argument shape; its ``updatedInput`` is translated back. Every payload also carries
``loom_tool_name`` and ``loom_tool_input`` as Loom has them.

What maps (Loom argument -> Claude argument):

- ``shell__run`` = ``Bash``: ``command``; ``timeout_s`` (seconds) = ``timeout`` (milliseconds); ``cwd`` kept.
- ``fs__read`` = ``Read``: ``path`` = ``file_path``; ``start_line`` = ``offset``; ``end_line`` from ``limit``.
- ``fs__write`` = ``Write``: ``path`` = ``file_path``; ``content``.
- ``fs__edit`` = ``Edit``: ``path`` = ``file_path``, ``old`` = ``old_string``, ``new`` = ``new_string``,
  ``replace_all``.
- ``fs__glob`` = ``Glob``, ``fs__list`` = ``LS``: ``pattern``, ``path``.
- ``fs__grep`` = ``Grep``: ``pattern``, ``path``, ``glob``; ``ignore_case`` = ``-i``; ``max_matches`` = ``head_limit``.

A Claude ``file_path`` is absolute: a relative Loom path is joined to the session's directory. Arguments with no
counterpart pass through under their own names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from orchestrator.hub.names import BUILT_IN_SERVERS

__all__ = ["CLAUDE_NAMES", "ToolNames", "from_claude", "to_claude", "tool_names"]

CLAUDE_NAMES: dict[str, str] = {
    "shell__run": "Bash",
    "fs__read": "Read",
    "fs__write": "Write",
    "fs__edit": "Edit",
    "fs__glob": "Glob",
    "fs__grep": "Grep",
    "fs__list": "LS",
}
"""Loom's built-in tools that are a Claude Code built-in tool, by Loom name (cf. ``orchestrator.agents.claude``)."""

_RENAMES: dict[str, dict[str, str]] = {
    "fs__read": {"path": "file_path", "start_line": "offset"},
    "fs__write": {"path": "file_path"},
    "fs__edit": {"path": "file_path", "old": "old_string", "new": "new_string"},
    "fs__grep": {"ignore_case": "-i", "max_matches": "head_limit"},
}


class ToolNames:
    """A tool's names a matcher is tried against."""

    __slots__ = ("claude", "loom", "mcp")

    def __init__(self, loom: str, claude: str, mcp: str) -> None:
        self.loom = loom
        self.claude = claude
        """Its Claude Code built-in name, or empty."""
        self.mcp = mcp
        """``mcp__SERVER__TOOL`` for an external server's tool, or empty."""

    def all(self) -> tuple[str, ...]:
        """Every name, Loom's first."""
        return tuple(n for n in (self.loom, self.claude, self.mcp) if n)

    def claude_form(self) -> str:
        """The name a Claude Code hook knows it by (its Loom name when it has no other)."""
        return self.claude or self.mcp or self.loom


def tool_names(loom: str, server: str, remote: str) -> ToolNames:
    """The names of the Loom tool ``loom`` of ``server`` (``remote``: the server's own name for it)."""
    mcp = f"mcp__{server}__{remote}" if server and server not in BUILT_IN_SERVERS else ""
    return ToolNames(loom, CLAUDE_NAMES.get(loom, ""), mcp)


def _absolute(path: object, cwd: str) -> object:
    if not isinstance(path, str) or path.startswith("/") or not cwd:
        return path
    return f"{cwd.rstrip('/')}/{path}" if path not in ("", ".") else cwd


def to_claude(loom: str, arguments: Mapping[str, Any], cwd: str) -> dict[str, Any]:
    """``arguments`` of the Loom tool ``loom`` in the shape its Claude Code tool takes."""
    out: dict[str, Any] = {}
    renames = _RENAMES.get(loom, {})
    for key, value in arguments.items():
        out[renames.get(key, key)] = value
    if loom == "shell__run" and "timeout_s" in out:
        seconds = out.pop("timeout_s")
        if isinstance(seconds, int | float) and not isinstance(seconds, bool):
            out["timeout"] = int(seconds * 1000)
    if loom == "fs__read" and "end_line" in out:
        end, start = out.pop("end_line"), out.get("offset", 1)
        if isinstance(end, int) and isinstance(start, int):
            out["limit"] = max(end - start + 1, 0)
    if "file_path" in out:
        out["file_path"] = _absolute(out["file_path"], cwd)
    elif loom in ("fs__glob", "fs__grep", "fs__list") and "path" in out:
        out["path"] = _absolute(out["path"], cwd)
    return out


def from_claude(loom: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """A hook's ``updatedInput`` in Claude Code's shape, back in the Loom tool's."""
    back = {claude: own for own, claude in _RENAMES.get(loom, {}).items()}
    out = {back.get(key, key): value for key, value in arguments.items()}
    convert: Callable[[dict[str, Any]], None] | None = _CONVERTERS.get(loom)
    if convert is not None:
        convert(out)
    return out


def _bash_back(out: dict[str, Any]) -> None:
    ms = out.pop("timeout", None)
    if isinstance(ms, int | float) and not isinstance(ms, bool):
        out["timeout_s"] = ms / 1000
    out.pop("description", None)  # Claude's Bash takes a description; Loom's shell does not
    out.pop("run_in_background", None)


def _read_back(out: dict[str, Any]) -> None:
    limit = out.pop("limit", None)
    if isinstance(limit, int) and not isinstance(limit, bool):
        start = out.get("start_line", 1)
        out["end_line"] = (start if isinstance(start, int) else 1) + limit - 1


_CONVERTERS: dict[str, Callable[[dict[str, Any]], None]] = {"shell__run": _bash_back, "fs__read": _read_back}
