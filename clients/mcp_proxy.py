"""``loom mcp`` attached to a running daemon: a stdio MCP server whose tools are the daemon's face.

Above this sits the driving agent (Claude Code, Codex, ...) talking MCP over our stdin/stdout; below
it, a :class:`~clients.daemon_link.DaemonLink`. ``list_tools`` and ``call_tool`` are forwarded as
they are: a result's ``content``, ``structured_content`` and ``is_error`` come back unchanged,
progress is relayed, and a JSON-RPC error the daemon raises is raised again.

When the daemon asks the caller something (``review_approval`` elicits a decision), the question is
relayed in whichever era the caller speaks: a 2026-07-28 caller gets the daemon's
``InputRequiredResult`` and answers it by calling again; a handshake-era caller is asked over its
back-channel and the answer is sent on to the daemon.
"""

from __future__ import annotations

from typing import Any

from mcp import MCPError
from mcp import types as mt
from mcp.server import Server, ServerRequestContext
from mcp.shared.message import ServerMessageMetadata

from clients.daemon_link import DaemonLink, error_result

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
        result = await link.call_tool(
            params.name, arguments, relay, input_responses=params.input_responses, request_state=params.request_state
        )
        for _ in range(MAX_INPUT_ROUNDS):
            if not isinstance(result, mt.InputRequiredResult) or not ctx.session.can_send_request:
                return result  # a 2026-07-28 caller answers an InputRequiredResult itself, by calling again
            try:
                answers = await _ask_caller(ctx, result)
            except MCPError as exc:
                return error_result(f"Loom: the daemon asks a question that your MCP client could not answer: {exc}")
            result = await link.call_tool(
                params.name, arguments, relay, input_responses=answers, request_state=result.request_state
            )
        return error_result(f"Loom: {params.name} asked more than {MAX_INPUT_ROUNDS} questions; giving up")

    return Server("loom", instructions=link.instructions, on_list_tools=list_tools, on_call_tool=call_tool)


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
