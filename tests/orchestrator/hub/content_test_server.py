"""An external MCP server whose tools return every kind of content, run as a real subprocess over stdio.

Images are real PNG files made here (:func:`png`), so their size and signature are what a model API would check.
"""

from __future__ import annotations

import base64
import logging
import struct
import sys
import zlib
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)


def png(width: int, height: int, *, padding: int = 0) -> bytes:
    """A valid grey PNG of ``width`` × ``height`` (``padding`` bytes of a private chunk make it as big as wanted)."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    rows = b"".join(b"\x00" + bytes([128]) * width for _ in range(height))
    extra = chunk(b"zzZz", b"\x00" * padding) if padding else b""
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + extra
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def b64(data: bytes) -> str:
    """Base64 text of ``data``, as MCP carries binary content."""
    return base64.b64encode(data).decode()


CHART = png(64, 48)
WAV = b"RIFF" + struct.pack("<I", 36 + 2000) + b"WAVEfmt " + b"\x00" * 2020

logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
server = MCPServer("content", log_level="WARNING")


@server.tool()
def chart() -> CallToolResult:
    """A chart: a line of text, then the image (labelled as JPEG, which its bytes are not)."""
    return CallToolResult(
        content=[
            TextContent(type="text", text="the chart of last week"),
            ImageContent(type="image", data=b64(CHART), mime_type="image/jpeg"),
        ]
    )


@server.tool()
def huge_image() -> CallToolResult:
    """A real PNG past 5 MB of base64."""
    return CallToolResult(
        content=[ImageContent(type="image", data=b64(png(640, 480, padding=4_200_000)), mime_type="image/png")]
    )


@server.tool()
def not_an_image() -> CallToolResult:
    """Text posing as a PNG."""
    return CallToolResult(content=[ImageContent(type="image", data=b64(b"<html>hello</html>"), mime_type="image/png")])


@server.tool()
def sound() -> CallToolResult:
    """A short WAV."""
    return CallToolResult(content=[AudioContent(type="audio", data=b64(WAV), mime_type="audio/wav")])


@server.tool()
def link() -> CallToolResult:
    """A link to a resource, with all its metadata."""
    return CallToolResult(
        content=[
            ResourceLink(
                type="resource_link",
                uri="file:///reports/q3.pdf",
                name="q3.pdf",
                title="Q3 report",
                description="Revenue by region, third quarter",
                mime_type="application/pdf",
                size=48213,
            )
        ]
    )


@server.tool()
def embedded() -> CallToolResult:
    """Three embedded resources: a text file, an image and a PDF."""
    return CallToolResult(
        content=[
            EmbeddedResource(
                type="resource",
                resource=TextResourceContents(
                    uri="file:///notes.md", mime_type="text/markdown", text="# Notes\nship it"
                ),
            ),
            EmbeddedResource(
                type="resource",
                resource=BlobResourceContents(uri="file:///logo.png", mime_type="image/png", blob=b64(png(16, 16))),
            ),
            EmbeddedResource(
                type="resource",
                resource=BlobResourceContents(
                    uri="file:///a.pdf", mime_type="application/pdf", blob=b64(b"%PDF" * 300)
                ),
            ),
        ]
    )


@server.tool()
def search() -> CallToolResult:
    """A summary in text and the results only in the structured content."""
    return CallToolResult(
        content=[TextContent(type="text", text="found 2 results")],
        structured_content={"results": [{"id": 7, "title": "alpha"}, {"id": 9, "title": "beta"}]},
    )


@server.tool()
def point() -> dict[str, Any]:
    """Structured output as the SDK writes it: the text block is the same JSON."""
    return {"x": 1, "y": 2}


@server.tool()
def tags() -> list[str]:
    """A bare list: the SDK writes one text block per item and wraps the list as ``{"result": [...]}``."""
    return ["red", "green"]


if __name__ == "__main__":
    server.run()
