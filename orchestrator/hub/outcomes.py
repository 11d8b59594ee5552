"""What the model is told when a tool call ends: one :class:`ToolOutcome` per call, never an exception.

Every failure is classified (:data:`~orchestrator.events.FailureKind`) and worded the same way: what
happened, then what to do about it, in one or two short sentences. The kinds ``denied`` (policy or a
person said no) are worded by the approval code; the hub words the rest here.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from mcp import MCPError
from mcp import types as mt

from orchestrator.events import FailureKind

_MAX_REASON = 300
"""Characters of a server's error quoted to the model; the full text goes to the event log."""


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """What a tool call produced, ready to feed back to the model."""

    content: str
    is_error: bool = False
    failure: FailureKind | None = None
    structured: dict[str, Any] | None = None
    attempts: int = 1
    """How many times the call was sent; more than one only for retried read-only or idempotent tools."""


def unknown_tool(name: str, known: list[str]) -> ToolOutcome:
    """The model named a tool that does not exist."""
    listed = ", ".join(known[:30]) + (", ..." if len(known) > 30 else "")
    return ToolOutcome(f"unknown tool {name!r}; call one of the available tools: {listed}", True, "unknown_tool")


def invalid_arguments(name: str, problem: str) -> ToolOutcome:
    """The arguments do not match the tool's input schema (checked here, or reported by the server)."""
    return ToolOutcome(
        f"invalid arguments for {name}: {problem}. Fix the arguments to match the tool's input schema and call again",
        True,
        "invalid_arguments",
    )


def server_unavailable(server: str, error: str | None) -> ToolOutcome:
    """The server is down, failed to start, or its connection broke during the call."""
    return ToolOutcome(
        f"MCP server {server!r} is unavailable ({_short(error or 'not connected')}); "
        "try another way or tell the user it needs fixing",
        True,
        "server_unavailable",
    )


def outcome_unknown(name: str, server: str, error: str, *, read_only: bool) -> ToolOutcome:
    """The server died or its connection broke while the call was in flight: nobody knows whether it took effect.

    Worded like a call a crash left unfinished on resume: the effect may have happened, so the model must look
    before it repeats the call (a read-only tool changed nothing, so it may simply be called again).
    """
    if read_only:
        then = f"{name} is read-only, so nothing was changed; call it again once the server is back"
    else:
        then = (
            f"the outcome is unknown: {name} may already have taken effect. Check (read the file, list the "
            "resource) before repeating it, or tell the user"
        )
    return ToolOutcome(
        f"MCP server {server!r} stopped during the call ({_short(error)}); {then}", True, "outcome_unknown"
    )


def timed_out(name: str, timeout_s: float, *, read_only: bool, takes_timeout: bool = False) -> ToolOutcome:
    """The call ran past its time limit and was cancelled on the server.

    Args:
        name: The namespaced tool name.
        timeout_s: The limit that was hit.
        read_only: The tool promises no side effects, so a partial run left nothing behind.
        takes_timeout: The tool has a ``timeout_s`` argument the model can raise.
    """
    effects = "" if read_only else "; it may have done part of its work, so check before repeating it"
    longer = ", pass a larger timeout_s," if takes_timeout else ""
    return ToolOutcome(
        f"{name} did not finish within {timeout_s:g}s and was cancelled{effects}. "
        f"Try a smaller request (narrower path, fewer items){longer} or another approach",
        True,
        "timed_out",
    )


def protocol_error(name: str, exc: MCPError) -> ToolOutcome:
    """The server answered the call with a JSON-RPC error instead of a result."""
    if exc.code == mt.INVALID_PARAMS:
        return invalid_arguments(name, _short(exc.message))
    return ToolOutcome(
        f"{name} failed: {_short(str(exc))}. Check the arguments, or try another way", True, "tool_error"
    )


def from_result(result: mt.CallToolResult) -> ToolOutcome:
    """A server's result as text for the model; ``is_error`` results are the tool's own failure message."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, mt.TextContent):
            parts.append(block.text)
        elif isinstance(block, mt.ImageContent | mt.AudioContent):
            parts.append(f"[{block.type}: {block.mime_type}]")
        elif isinstance(block, mt.EmbeddedResource):
            res = block.resource
            parts.append(res.text if isinstance(res, mt.TextResourceContents) else f"[resource {res.uri}]")
        elif isinstance(block, mt.ResourceLink):
            parts.append(f"[resource link {block.uri}]")
    text = printable("\n".join(parts))
    structured = printable_json(result.structured_content)
    if not text and structured is not None:
        text = json.dumps(structured)
    if result.is_error and not text:
        text = "the tool reported an error without a message; try another way"
    return ToolOutcome(
        text,
        is_error=result.is_error,
        failure="tool_error" if result.is_error else None,
        structured=structured,
    )


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape_surrogate(match: re.Match[str]) -> str:
    code = ord(match.group())
    # U+DC80..U+DCFF is how Python carries an undecodable byte of a file name (surrogateescape): show the byte.
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


def printable(text: str) -> str:
    r"""``text`` with any lone surrogate written out as an escape (``\xff`` for an undecodable file-name byte).

    A server that lists a file whose name is not UTF-8 may hand back such characters; no JSON encoder, SQLite or
    model API accepts them, and one of them would otherwise fail the run at the next store write.
    """
    return _LONE_SURROGATE.sub(_escape_surrogate, text) if not text.isascii() else text


def printable_json(value: Any) -> Any:
    """``value`` (parsed JSON) with :func:`printable` applied to every string in it, keys included."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {printable(str(k)): printable_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [printable_json(v) for v in value]
    return value


def describe(exc: BaseException) -> str:
    """A one-line description of an exception (the first leaf of an exception group)."""
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return describe(exc.exceptions[0])
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_REASON else text[: _MAX_REASON - 3] + "..."
