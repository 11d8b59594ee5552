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
from orchestrator.hub.media import MediaReader
from orchestrator.messages import Attachment

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
    attachments: tuple[Attachment, ...] = ()
    """The result's parts that are not text (images a model may be shown, and what else was left out of the text)."""


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


def from_result(result: mt.CallToolResult, *, external: bool = False) -> ToolOutcome:
    """A server's result for the model; ``is_error`` results are the tool's own failure message.

    Every block has its place in the text, in order: text as it is, an embedded text resource under a line with
    its URI and type, a resource link as a line with all its metadata, and an image, a sound or a binary resource
    as a line saying what it is (:mod:`orchestrator.hub.media`); an image a model can be shown is also kept as an
    attachment, for providers that take images. Structured content is the text when there is no text; an
    ``external`` server's (one not Loom's own, whose texts are renderings of their structured results made for
    the model) follows its text too, unless a text block already is that JSON (as the SDK writes it).
    """
    parts: list[str] = []
    attachments: list[Attachment] = []
    media = MediaReader()
    texts: list[str] = []
    for block in result.content:
        if isinstance(block, mt.TextContent):
            parts.append(block.text)
            texts.append(block.text)
        elif isinstance(block, mt.ImageContent):
            part, line = media.image(block.data, block.mime_type)
            attachments.append(part)
            parts.append(line)
        elif isinstance(block, mt.AudioContent):
            part, line = media.audio(block.data, block.mime_type)
            attachments.append(part)
            parts.append(line)
        elif isinstance(block, mt.EmbeddedResource):
            res = block.resource
            if isinstance(res, mt.TextResourceContents):
                parts.append(f"[resource {res.uri} ({res.mime_type or 'text'})]\n{res.text}")
            else:
                part, line = media.blob(res.blob, res.mime_type, res.uri)
                attachments.append(part)
                parts.append(line)
        elif isinstance(block, mt.ResourceLink):
            parts.append(resource_link_line(block))
    text = printable("\n".join(parts))
    structured = printable_json(result.structured_content)
    if structured is not None and (not text or external and not _carried(structured, texts)):
        dumped = json.dumps(structured, ensure_ascii=False)
        text = f"{text}\n[structured content]\n{dumped}" if text else dumped
    if result.is_error and not text:
        text = "the tool reported an error without a message; try another way"
    return ToolOutcome(
        text,
        is_error=result.is_error,
        failure="tool_error" if result.is_error else None,
        structured=structured,
        attachments=tuple(attachments),
    )


def resource_link_line(link: mt.ResourceLink) -> str:
    """A resource link as the model reads it: every field the server gave, under MCP's own names."""
    fields = {
        "uri": link.uri,
        "name": link.name,
        "title": link.title,
        "description": link.description,
        "mimeType": link.mime_type,
        "size": link.size,
    }
    shown = {k: v for k, v in fields.items() if v is not None and v != ""}
    return f"[resource link {json.dumps(shown, ensure_ascii=False)}]"


def _carried(structured: Any, texts: list[str]) -> bool:
    """Whether the text blocks already say what the structured content does, as the SDK writes them.

    The SDK's text for a structured result is its JSON; for a tool returning a bare value (wrapped as
    ``{"result": value}``) it is the value, and for a list, one text block per item.
    """
    if any(_says(text, structured) for text in texts):
        return True
    if not (isinstance(structured, dict) and len(structured) == 1):
        return False
    [value] = structured.values()
    if isinstance(value, list) and len(texts) == len(value) > 1:
        return all(_says(text, item) for text, item in zip(texts, value, strict=True))
    return any(_says(text, value) for text in texts)


def _says(text: str, value: Any) -> bool:
    if isinstance(value, str) and text == value:
        return True
    try:
        return bool(json.loads(text) == value)
    except ValueError:
        return False


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
