"""How other servers' resources, templates and prompts read to a model: plain text, bounded, images kept whole.

A model reads these results as it reads any tool's: text first. Listings are one line per item (what to pass
back, then its name and what it is), a resource's text is given as the server sent it up to `MAX_TEXT`
characters in all, with a line saying what was cut, and binary contents are described, except images and audio
small enough for a model API to take, which stay content blocks (Loom turns them into image blocks where the
provider takes them, a placeholder otherwise).
"""

from __future__ import annotations

from mcp import types as mt

__all__ = [
    "MAX_MEDIA_BYTES",
    "MAX_TEXT",
    "Budget",
    "prompt_blocks",
    "prompts_text",
    "resource_blocks",
    "resources_text",
]

MAX_TEXT = 50_000
"""The most characters of text one read or prompt returns: more would crowd the context and the store alike."""
MAX_MEDIA_BYTES = 4_000_000
"""The largest image or audio passed on as itself (model APIs refuse images past about 5 MB)."""
_MEDIA = ("image/", "audio/")


class Budget:
    """What is left of `MAX_TEXT` for one result, and whether anything was cut."""

    def __init__(self, limit: int = MAX_TEXT) -> None:
        self.left = limit
        self.limit = limit
        self.cut = 0
        """Characters left out."""

    def take(self, text: str) -> str:
        """``text``, or as much of it as the budget still allows."""
        kept = text[: max(self.left, 0)]
        self.left -= len(kept)
        self.cut += len(text) - len(kept)
        return kept

    def note(self) -> str:
        """A line saying what was cut, or ``""``."""
        if not self.cut:
            return ""
        return (
            f"\n[cut: {self.cut} more characters not shown; Loom returns at most {self.limit} characters of text "
            "per read]"
        )


def _size(n: int | None) -> str:
    if n is None:
        return ""
    for unit, step in (("MB", 1_000_000), ("kB", 1_000)):
        if n >= step:
            return f"{n / step:.1f} {unit}"
    return f"{n} bytes"


def _details(*parts: str | None) -> str:
    shown = [p for p in parts if p]
    return f" ({', '.join(shown)})" if shown else ""


def _line(key: str, name: str, title: str | None, details: str, description: str | None) -> str:
    label = f" {title!r}" if title and title != name else ""
    named = f" {name!r}" if name and name != key else ""
    about = f": {' '.join(description.split())}" if description else ""
    return f"- {key}{named}{label}{details}{about}"


def resources_text(
    server: str,
    resources: list[mt.Resource],
    templates: list[mt.ResourceTemplate],
    next_cursor: str | None,
) -> str:
    """A server's resources (one page) and templates, one per line."""
    lines = [f"Resources of {server}:" if resources else f"{server} lists no resources on this page."]
    for r in resources:
        lines.append(_line(r.uri, r.name, r.title, _details(r.mime_type, _size(r.size)), r.description))
    if templates:
        lines.append(f"Resource templates of {server} (fill in the {{braces}} to make a URI to read):")
        for t in templates:
            lines.append(_line(t.uri_template, t.name, t.title, _details(t.mime_type), t.description))
    if next_cursor:
        lines.append(f"More: call again with cursor={next_cursor!r}.")
    return "\n".join(lines)


def prompts_text(server: str, prompts: list[mt.Prompt], next_cursor: str | None) -> str:
    """A server's prompts (one page) with their arguments, one per line."""
    lines = [f"Prompts of {server}:" if prompts else f"{server} lists no prompts on this page."]
    for p in prompts:
        args = ", ".join(f"{a.name}{'' if a.required else '?'}" for a in p.arguments or [])
        lines.append(_line(p.name, p.name, p.title, f" ({args})" if args else " ()", p.description))
    if next_cursor:
        lines.append(f"More: call again with cursor={next_cursor!r}.")
    return "\n".join(lines)


def _blob_bytes(blob: str) -> int:
    """The decoded size of base64 text, without decoding it."""
    return max(len(blob) * 3 // 4 - (len(blob) - len(blob.rstrip("="))), 0)


def _contents_blocks(
    contents: mt.TextResourceContents | mt.BlobResourceContents, budget: Budget
) -> list[mt.ContentBlock]:
    mime = contents.mime_type or ""
    if isinstance(contents, mt.TextResourceContents):
        return [mt.TextContent(type="text", text=budget.take(contents.text))]
    size = _blob_bytes(contents.blob)
    if mime.startswith(_MEDIA) and size <= MAX_MEDIA_BYTES:
        if mime.startswith("image/"):
            return [mt.ImageContent(type="image", data=contents.blob, mime_type=mime)]
        return [mt.AudioContent(type="audio", data=contents.blob, mime_type=mime)]
    why = "too large to show" if mime.startswith(_MEDIA) else "binary content is not shown as text"
    return [mt.TextContent(type="text", text=f"[binary {mime or 'data'}, {_size(size)}: {why}]")]


def resource_blocks(server: str, uri: str, result: mt.ReadResourceResult) -> list[mt.ContentBlock]:
    """A read resource as content blocks: a header, then each of its contents (text bounded, media whole)."""
    budget = Budget()
    blocks: list[mt.ContentBlock] = []
    for contents in result.contents:
        header = f"{contents.uri}{_details(contents.mime_type)}:" if len(result.contents) > 1 else ""
        if header:
            blocks.append(mt.TextContent(type="text", text=header))
        blocks.extend(_contents_blocks(contents, budget))
    if not result.contents:
        blocks.append(mt.TextContent(type="text", text=f"{server} returned no contents for {uri}."))
    note = budget.note()
    if note:
        blocks.append(mt.TextContent(type="text", text=note.strip()))
    return blocks


def _message_block(block: mt.ContentBlock, budget: Budget) -> mt.ContentBlock:
    if isinstance(block, mt.TextContent):
        return mt.TextContent(type="text", text=budget.take(block.text))
    if isinstance(block, mt.ImageContent | mt.AudioContent):
        return block
    if isinstance(block, mt.EmbeddedResource):
        inner = _contents_blocks(block.resource, budget)[0]
        if isinstance(inner, mt.TextContent):
            return mt.TextContent(type="text", text=f"[resource {block.resource.uri}]\n{inner.text}")
        return inner
    described = _details(block.mime_type, block.description)
    return mt.TextContent(type="text", text=f"[resource link {block.uri} {block.name!r}{described}]")


def prompt_blocks(server: str, name: str, result: mt.GetPromptResult) -> list[mt.ContentBlock]:
    """A prompt's messages, each headed by its role, as content blocks (text bounded in all)."""
    budget = Budget()
    about = f": {result.description}" if result.description else ""
    blocks: list[mt.ContentBlock] = [
        mt.TextContent(type="text", text=f"Prompt {name!r} of {server}{about} ({len(result.messages)} messages)")
    ]
    for message in result.messages:
        blocks.append(mt.TextContent(type="text", text=f"--- {message.role} ---"))
        blocks.append(_message_block(message.content, budget))
    note = budget.note()
    if note:
        blocks.append(mt.TextContent(type="text", text=note.strip()))
    return blocks
