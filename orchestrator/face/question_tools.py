"""The face's question tools: list what MCP servers ask a session's user, and answer it.

A server's elicitation request is a question on the session's stream (``question_asked``, see
:mod:`orchestrator.runtime.questions`); any client attached to the face may answer it here, the first answer
winning. A child session's questions show under its ancestors too, as its approvals do.
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

from orchestrator.face.caller import client_of
from orchestrator.protocol_questions import QuestionInfo, QuestionList
from orchestrator.runtime.host import SessionHost
from orchestrator.runtime.questions import PendingQuestion, QuestionError

__all__ = ["add_question_tools"]

_READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)


def question_info(q: PendingQuestion, asked: str | None = None) -> QuestionInfo:
    """A question as the face shows it (asked about an ancestor, a descendant's is tagged with the child)."""
    child = q.session_id if asked is not None and asked != q.session_id else ""
    return QuestionInfo(
        question_id=q.question_id,
        session_id=asked if child and asked is not None else q.session_id,
        run_id=q.run_id,
        server=q.server,
        message=q.message,
        mode=q.mode,
        requested_schema=q.requested_schema,
        url=q.url,
        action=q.action,
        answered_by=q.answered_by,
        reason=q.reason,
        child_session_id=child,
    )


def add_question_tools(face: MCPServer, host: SessionHost) -> None:
    """Register ``list_questions`` and ``answer_question`` on ``face``."""
    desk = host.runtime.questions

    @face.tool(annotations=_READ_ONLY)
    async def list_questions(session_id: str | None = None) -> QuestionList:
        """Questions MCP servers asked and nobody answered yet (all sessions, or one and its child sessions)."""
        return QuestionList(questions=[question_info(q, session_id) for q in desk.open_questions(session_id)])

    @face.tool()
    async def answer_question(
        question_id: str,
        action: str,
        ctx: Context,
        content: dict[str, Any] | None = None,
        answered_by: str = "",
    ) -> QuestionInfo:
        """Answer a server's question; the first answer wins.

        action: 'accept' (form mode: with ``content``, an object matching the question's requested_schema; url
        mode: you went to the URL), 'decline' or 'cancel' (no content). Content that does not match the schema is
        refused with the reason, and the question stays open.
        """
        try:
            return question_info(await desk.answer(question_id, action, content, answered_by or client_of(ctx)))
        except QuestionError as exc:
            raise ToolError(str(exc)) from exc
