"""Calling an MCP tool from a test: its structured result, or the text of the error it answered with."""

from __future__ import annotations

from typing import Any

from mcp import Client


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """Call ``tool`` and return its structured result, failing the test on a tool error."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return dict(result.structured_content)


async def error_of(client: Client, tool: str, **arguments: Any) -> str:
    """Call ``tool``, which must answer with an error, and return the error's text."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result
    return " ".join(getattr(block, "text", "") for block in result.content)
