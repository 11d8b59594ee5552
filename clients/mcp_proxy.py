"""``loom mcp`` when Loom cannot run: a stdio MCP server that lists the face's tools and answers each call with why.

An attached ``loom mcp`` no longer goes through here: it relays to the daemon on the standard library
alone (:mod:`clients.relay`), because importing the SDK cost most of its start. This SDK server is what is
left for the refusal mode (a bad config, the home in use, a daemon that refuses us), which runs the
embedded path's imports anyway.

Whichever way ``loom mcp`` runs (attached, embedded, or refusing because it cannot run), it introduces
itself alike: name ``loom``, the package version, and the capabilities of the face itself
(:func:`loom_server`), so that a client cannot tell the paths apart by the handshake.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from mcp import MCPError
from mcp import types as mt
from mcp.server import Server, ServerRequestContext
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler

from servers._version import loom_version


def build_refusal(reason: str, tools: list[mt.Tool]) -> Server[Any]:
    """A ``loom`` server that cannot run sessions: it lists ``tools`` and every call answers ``reason``.

    ``loom mcp`` serves this when it cannot start (a bad config, another process running sessions on the
    home, a daemon that refuses it), so that the client sees why in each tool result instead of a closed
    connection.
    """

    async def list_tools(
        ctx: ServerRequestContext[Any], params: mt.PaginatedRequestParams | None
    ) -> mt.ListToolsResult:
        return mt.ListToolsResult(tools=tools)

    async def call_tool(ctx: ServerRequestContext[Any], params: mt.CallToolRequestParams) -> mt.CallToolResult:
        return error_result(f"Loom cannot run, so {params.name} was not run: {reason}")

    return loom_server(f"Loom cannot run: {reason}", list_tools, call_tool)


ListTools = Callable[[ServerRequestContext[Any], mt.PaginatedRequestParams | None], Awaitable[mt.ListToolsResult]]
CallTool = Callable[
    [ServerRequestContext[Any], mt.CallToolRequestParams], Awaitable[mt.CallToolResult | mt.InputRequiredResult]
]


def loom_server(instructions: str | None, list_tools: ListTools, call_tool: CallTool) -> Server[Any]:
    """A low-level server that introduces itself as the face does: ``loom``, Loom's version, the face's capabilities.

    The face also serves prompts, resources with subscriptions, completions, logging, the 2026-07-28
    ``subscriptions/listen`` and the tasks extension; this serves each of them empty (or refused), so that the
    declared capabilities match the face's in either era whether or not Loom can run.
    """
    server = Server(
        "loom",
        version=loom_version(),
        instructions=instructions,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_prompts=_no_prompts,
        on_get_prompt=_unknown_prompt,
        on_list_resources=_no_resources,
        on_list_resource_templates=_no_resource_templates,
        on_read_resource=_unknown_resource,
        on_subscriptions_listen=ListenHandler(InMemorySubscriptionBus()),
        on_subscribe_resource=_unknown_subscription,
        on_unsubscribe_resource=_no_subscription,
        on_completion=_no_completions,
        on_set_logging_level=_any_level,
    )
    # As the face's RunTasks declares it (orchestrator.face.tasks.IDENTIFIER, not imported: clients stay off the
    # orchestrator's modules); a call here is answered with its error result, never with a task.
    server.extensions["io.modelcontextprotocol/tasks"] = {}
    return server


async def _unknown_subscription(ctx: ServerRequestContext[Any], params: mt.SubscribeRequestParams) -> mt.EmptyResult:
    raise MCPError(code=mt.INVALID_PARAMS, message=f"Unknown resource: {params.uri}")


async def _no_subscription(ctx: ServerRequestContext[Any], params: mt.UnsubscribeRequestParams) -> mt.EmptyResult:
    return mt.EmptyResult()


async def _no_completions(ctx: ServerRequestContext[Any], params: mt.CompleteRequestParams) -> mt.CompleteResult:
    return mt.CompleteResult(completion=mt.Completion(values=[]))


async def _any_level(ctx: ServerRequestContext[Any], params: mt.SetLevelRequestParams) -> mt.EmptyResult:
    return mt.EmptyResult()


async def _no_prompts(ctx: ServerRequestContext[Any], params: mt.PaginatedRequestParams | None) -> mt.ListPromptsResult:
    return mt.ListPromptsResult(prompts=[])


async def _unknown_prompt(ctx: ServerRequestContext[Any], params: mt.GetPromptRequestParams) -> mt.GetPromptResult:
    raise MCPError(code=mt.INVALID_PARAMS, message=f"Unknown prompt: {params.name}")


async def _no_resources(
    ctx: ServerRequestContext[Any], params: mt.PaginatedRequestParams | None
) -> mt.ListResourcesResult:
    return mt.ListResourcesResult(resources=[])


async def _no_resource_templates(
    ctx: ServerRequestContext[Any], params: mt.PaginatedRequestParams | None
) -> mt.ListResourceTemplatesResult:
    return mt.ListResourceTemplatesResult(resource_templates=[])


async def _unknown_resource(
    ctx: ServerRequestContext[Any], params: mt.ReadResourceRequestParams
) -> mt.ReadResourceResult:
    raise MCPError(code=mt.INVALID_PARAMS, message=f"Unknown resource: {params.uri}")


def error_result(text: str) -> mt.CallToolResult:
    """A tool result with ``is_error`` set and ``text`` as its one content block."""
    return mt.CallToolResult(content=[mt.TextContent(type="text", text=text)], is_error=True)
