"""The face's results for ``list_questions`` and ``answer_question``: what MCP servers ask a session's user.

Part of the face's protocol like :mod:`orchestrator.protocol` (``docs/protocol.md`` lists them), kept in a
module of its own. Only pydantic is imported, so a client pays for nothing else.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

__all__ = ["QuestionInfo", "QuestionList"]


class QuestionInfo(BaseModel):
    """A question an MCP server asked (elicitation), waiting for an answer or just answered."""

    question_id: str
    session_id: str
    """The session asked about; for a descendant's question, the one the list was asked for (see
    ``child_session_id``)."""
    run_id: str = ""
    """The run whose tool call the server was serving when it asked (empty: none was going)."""
    server: str
    """The MCP server asking, by its name in ``mcpServers``."""
    message: str
    """What the server says to the user."""
    mode: str = "form"
    """``form``: answer with ``content`` matching ``requested_schema``; ``url``: open ``url`` yourself (Loom never
    opens it) and answer ``accept`` once done, or ``decline``."""
    requested_schema: dict[str, Any] = Field(default_factory=dict)
    """The JSON schema of the answer's ``content`` (form mode): an object of flat fields."""
    url: str = ""
    action: str | None = None
    """``accept``, ``decline`` or ``cancel`` once answered; null while open."""
    answered_by: str = ""
    reason: str = ""
    """Why Loom answered it itself (a headless session, nobody answered in time), if it did."""
    child_session_id: str = ""
    """Set when the question is a descendant's (a child session's): that session."""


class QuestionList(BaseModel):
    """Questions waiting for an answer."""

    questions: list[QuestionInfo]
