"""``loom mcp`` attached to a running daemon: a stdio MCP server whose tools are the daemon's face.

Above this sits the driving agent (Claude Code, Codex, ...) talking MCP over our stdin/stdout; below
it, a :class:`~clients.daemon_link.DaemonLink`. ``list_tools`` and ``call_tool`` are forwarded as
they are: a result's ``content``, ``structured_content`` and ``is_error`` come back unchanged,
progress is relayed, and a JSON-RPC error the daemon raises is raised again.

When the daemon asks the caller something (``review_approval`` elicits a decision), the question is
relayed in whichever era the caller speaks: a 2026-07-28 caller gets the daemon's
``InputRequiredResult`` and answers it by calling again; a handshake-era caller is asked over its
back-channel and the answer is sent on to the daemon. Every forwarded call names the client driving
us in its ``_meta`` (:data:`~orchestrator.protocol.DRIVING_CLIENT_META`), so that what it decides is
recorded as decided by it.

Whichever way ``loom mcp`` runs (attached, embedded, or refusing because it cannot run), it introduces
itself alike: name ``loom``, the package version, and the capabilities of the face itself
(:func:`loom_server`), so that a client cannot tell the paths apart by the handshake.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

from mcp import MCPError
from mcp import types as mt
from mcp.server import Server, ServerRequestContext
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.message import ServerMessageMetadata

from clients.daemon_link import DaemonLink, error_result
from orchestrator.protocol import DRIVING_CLIENT_META
from servers._version import loom_version

MAX_INPUT_ROUNDS = 10
"""Questions relayed for one call before giving up (the SDK client's own limit)."""

_ANSWER_TYPES: dict[str, type[mt.ElicitResult | mt.CreateMessageResult | mt.ListRootsResult]] = {
    "elicitation/create": mt.ElicitResult,
    "sampling/createMessage": mt.CreateMessageResult,
    "roots/list": mt.ListRootsResult,
}


def build_proxy(link: DaemonLink) -> Server[Any]:
    """A low-level MCP server whose tools are the daemon's, each call forwarded through ``link``."""

    async def list_tools(
        ctx: ServerRequestContext[Any], params: mt.PaginatedRequestParams | None
    ) -> mt.ListToolsResult:
        return mt.ListToolsResult(tools=await link.list_tools())

    async def call_tool(
        ctx: ServerRequestContext[Any], params: mt.CallToolRequestParams
    ) -> mt.CallToolResult | mt.InputRequiredResult:
        async def relay(progress: float, total: float | None, message: str | None) -> None:
            await ctx.session.report_progress(progress, total, message)  # a no-op unless our caller asked

        arguments = dict(params.arguments or {})
        driving = client_name(ctx)
        # An open map with one key of ours; mypy does not know TypedDict extra_items (PEP 728) yet.
        meta = cast(mt.RequestParamsMeta, {DRIVING_CLIENT_META: driving}) if driving else None
        result = await link.call_tool(
            params.name,
            arguments,
            relay,
            input_responses=params.input_responses,
            request_state=params.request_state,
            meta=meta,
        )
        for _ in range(MAX_INPUT_ROUNDS):
            if not isinstance(result, mt.InputRequiredResult) or not ctx.session.can_send_request:
                return result  # a 2026-07-28 caller answers an InputRequiredResult itself, by calling again
            try:
                answers = await _ask_caller(ctx, result)
            except MCPError as exc:
                return error_result(f"Loom: the daemon asks a question that your MCP client could not answer: {exc}")
            result = await link.call_tool(
                params.name, arguments, relay, input_responses=answers, request_state=result.request_state, meta=meta
            )
        return error_result(f"Loom: {params.name} asked more than {MAX_INPUT_ROUNDS} questions; giving up")

    return loom_server(link.instructions, list_tools, call_tool)


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

    The face is an ``MCPServer``, which also serves (empty) prompts and resources and the 2026-07-28
    ``subscriptions/listen``; so does this, so that the declared capabilities match in either era.
    """
    return Server(
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
    )


def client_name(ctx: ServerRequestContext[Any]) -> str:
    """The ``clientInfo`` name our caller gave (in the handshake, or in a 2026-07-28 request's ``_meta``)."""
    params = ctx.session.client_params
    return params.client_info.name if params is not None else ""


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


async def _ask_caller(ctx: ServerRequestContext[Any], pending: mt.InputRequiredResult) -> mt.InputResponses:
    """Put the daemon's questions to a handshake-era caller over its back-channel."""
    answers: mt.InputResponses = {}
    for key, question in (pending.input_requests or {}).items():
        answers[key] = await ctx.session.send_request(
            question,
            _ANSWER_TYPES[question.method],
            metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
        )
    return answers
