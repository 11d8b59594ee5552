"""An external MCP server that asks things of its client: it elicits, samples, lists roots, reports progress, logs.

Run as a real subprocess over stdio by the client-capability tests. Every request to the client is made with the
SDK's ``Resolve`` markers, so the same tool works in both protocol eras (2026-07-28 ``input_required`` rounds;
handshake-era server requests). ``ASKING_LEGACY_ONLY=1`` makes it answer ``server/discover`` with "method not
found", as a 2025-era server does, so that a client in ``auto`` mode falls back to the ``initialize`` handshake.
"""

from __future__ import annotations

import logging
import os
import sys
import uuid
from typing import Annotated, Any

import anyio
from mcp import types as mt
from mcp.server.elicitation import AcceptedElicitation, ElicitationResult
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, ListRoots, Resolve, Sample
from pydantic import BaseModel

logging.basicConfig(level=logging.WARNING, stream=sys.stderr)


server = MCPServer("asking", log_level="WARNING")


class Order(BaseModel):
    """What ``ask`` asks the user for."""

    name: str
    count: int


def ask_order(topic: str) -> Elicit[Order]:
    return Elicit(f"How many {topic} should I order, and for whom?", Order)


@server.tool()
async def ask(topic: str, answer: Annotated[ElicitationResult[Order], Resolve(ask_order)]) -> str:
    """Ask the user for an order (form elicitation) and say what came back."""
    if isinstance(answer, AcceptedElicitation):
        return f"accepted: {answer.data.count} {topic} for {answer.data.name}"
    return f"not answered: {answer.action}"


@server.tool()
async def ask_url(ctx: Context) -> str | mt.InputRequiredResult:
    """Send the user to a URL (url elicitation) and say whether they went."""
    url = "https://example.com/connect"
    if ctx.protocol_version == "2026-07-28":
        responses = ctx.input_responses or {}
        if "go" in responses:
            answer = responses["go"]
            return f"url: {getattr(answer, 'action', answer)}"
        params = mt.ElicitRequestURLParams(message="Connect your account", url=url)
        return mt.InputRequiredResult(input_requests={"go": mt.ElicitRequest(params=params)}, request_state="url")
    result = await ctx.elicit_url("Connect your account", url, uuid.uuid4().hex)
    return f"url: {result.action}"


def summary_request(text: str) -> Sample:
    message = mt.SamplingMessage(role="user", content=mt.TextContent(type="text", text=f"Summarize: {text}"))
    return Sample([message], max_tokens=100, system_prompt="You write one-line summaries.")


@server.tool()
async def summarize(text: str, summary: Annotated[mt.CreateMessageResult, Resolve(summary_request)]) -> str:
    """Have the client's model summarize ``text`` (sampling) and return what it wrote."""
    content = summary.content
    written = content.text if isinstance(content, mt.TextContent) else content.type
    return f"summary by {summary.model}: {written}"


@server.tool()
async def roots(found: Annotated[mt.ListRootsResult, Resolve(lambda: ListRoots())]) -> str:
    """List the client's roots."""
    return " ".join(str(r.uri) for r in found.roots)


@server.tool()
async def whoami(ctx: Context) -> dict[str, Any]:
    """Who the client said it is, and what it said it can do."""
    params = ctx.session.client_params
    caps = ctx.session.client_capabilities
    info = params.client_info if params is not None else None
    return {
        "name": info.name if info is not None else None,
        "version": info.version if info is not None else None,
        "protocol": ctx.protocol_version,
        "can": sorted(k for k in ("elicitation", "sampling", "roots") if caps is not None and getattr(caps, k)),
    }


@server.tool()
async def slow(steps: int, ctx: Context) -> str:
    """Work in ``steps`` steps, reporting progress and logging each; warn at the end."""
    for i in range(steps):
        await ctx.report_progress(i + 1, steps, f"step {i + 1} of {steps}")
        await ctx.info(f"did step {i + 1}")
        await anyio.sleep(0.05)
    await ctx.warning("the disk is nearly full")
    return f"done {steps}"


@server.tool()
async def shout(times: int, ctx: Context) -> str:
    """Log ``times`` warnings at once (a flooding server)."""
    for i in range(times):
        await ctx.warning(f"warning {i}")
    return "shouted"


async def serve_legacy_only() -> None:
    """Serve stdio as a handshake-era server does: ``server/discover`` is a method it does not know.

    The SDK's server serves both eras, deciding by the first message; answering the probe here, before the SDK
    sees it, leaves the ``initialize`` that follows to decide.
    """
    from mcp.server.stdio import stdio_server
    from mcp.shared.message import SessionMessage
    from mcp_types.jsonrpc import JSONRPCError, JSONRPCRequest

    async with stdio_server() as (read, write), anyio.create_task_group() as tg:
        send, filtered = anyio.create_memory_object_stream[Any](16)

        async def pump() -> None:
            async with send:
                async for message in read:
                    wire = getattr(message, "message", None)
                    if isinstance(wire, JSONRPCRequest) and wire.method == "server/discover":
                        error = mt.ErrorData(code=mt.METHOD_NOT_FOUND, message="Method not found")
                        await write.send(SessionMessage(JSONRPCError(jsonrpc="2.0", id=wire.id, error=error)))
                        continue
                    await send.send(message)

        tg.start_soon(pump)
        low = server._lowlevel_server
        await low.run(filtered, write, low.create_initialization_options())
        tg.cancel_scope.cancel()


if __name__ == "__main__":
    if os.environ.get("ASKING_LEGACY_ONLY"):
        anyio.run(serve_legacy_only)
    else:
        server.run()
