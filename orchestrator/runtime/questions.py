"""Questions: what an MCP server asks the user (elicitation) waits on the event log for an answer.

A question is a request on the event log (``question_asked``) that any attached client may answer with
``answer_question``; the first answer wins (``question_answered``, with who gave it) and later ones are told it
was taken. Unlike an approval, a question waits a bounded time (:data:`DEFAULT_QUESTION_TIMEOUT_S`): the server
that asked holds a tool call open meanwhile, so a question nobody answers is cancelled, saying so. A headless
session declines at once, saying why. An answer that does not match the schema the server asked for is refused
with the reason, and the question stays open.

The desk is the runtime's (one for every session it opens); each session's client hooks
(:mod:`orchestrator.hub.client_caps`) put their questions on it.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import jsonschema
import jsonschema.exceptions

from orchestrator.events import QuestionAnswered, QuestionAsked
from orchestrator.store.eventlog import EventLog

__all__ = [
    "DEFAULT_QUESTION_TIMEOUT_S",
    "HEADLESS_REASON",
    "Action",
    "PendingQuestion",
    "QuestionDesk",
    "QuestionError",
]

Action = Literal["accept", "decline", "cancel"]
ACTIONS: tuple[Action, ...] = ("accept", "decline", "cancel")

DEFAULT_QUESTION_TIMEOUT_S = 300.0
"""How long a question waits for an answer: less than a tool call's default limit (600 s), so that the server
hears "cancelled" and the user reads why, rather than the call timing out with the question still showing."""
MAX_OPEN_PER_SESSION = 8
"""A server asking more at once than anybody could answer is declined past this (a hostile or looping server)."""
MAX_MESSAGE_CHARS = 4000
MAX_SCHEMA_CHARS = 20_000
HEADLESS_REASON = "the session is headless: nobody can answer a server's question, so Loom declined it"


class QuestionError(Exception):
    """An answer cannot be taken (unknown question, already answered, content that does not fit); says which."""


@dataclass
class PendingQuestion:
    """One question a server asked, and once answered, its answer."""

    question_id: str
    session_id: str
    ancestors: tuple[str, ...]
    """The sessions above the asking one (a child's parent first): each of them lists it too."""
    run_id: str
    server: str
    message: str
    requested_schema: dict[str, Any]
    mode: Literal["form", "url"] = "form"
    url: str = ""
    action: Action | None = None
    content: dict[str, Any] | None = None
    answered_by: str = ""
    reason: str = ""
    done: anyio.Event = field(default_factory=anyio.Event)


class QuestionDesk:
    """The questions waiting in a runtime's sessions, answerable by id from any client.

    Args:
        log: The runtime's event log (questions and answers are stored events).
        timeout_s: How long a question waits before it is cancelled.
    """

    def __init__(self, log: EventLog, *, timeout_s: float = DEFAULT_QUESTION_TIMEOUT_S) -> None:
        self.log = log
        self.timeout_s = timeout_s
        self.pending: dict[str, PendingQuestion] = {}

    def open_questions(self, session_id: str | None = None) -> list[PendingQuestion]:
        """Questions waiting for an answer, oldest first; a session's include its descendants'."""
        return [
            q
            for q in self.pending.values()
            if q.action is None and (session_id is None or q.session_id == session_id or session_id in q.ancestors)
        ]

    def question(self, question_id: str) -> PendingQuestion:
        """One open question by id.

        Raises:
            QuestionError: unknown, or already answered.
        """
        found = self.pending.get(question_id)
        if found is None or found.action is not None:
            raise QuestionError(
                f"question {question_id!r} is not open (unknown, already answered, or cancelled); "
                "list_questions shows the open ones"
            )
        return found

    async def ask(
        self,
        *,
        session_id: str,
        ancestors: tuple[str, ...],
        run_id: str,
        server: str,
        message: str,
        requested_schema: Mapping[str, Any] | None,
        mode: Literal["form", "url"] = "form",
        url: str = "",
        headless: bool = False,
    ) -> PendingQuestion:
        """Record a question and wait (at most :attr:`timeout_s`) for the first answer; returns it answered.

        Declined at once, with the reason recorded, when the session is ``headless``, when the session has too many
        open already, or when the schema is not one an answer could be checked against. Cancelling the caller (the
        tool call ended) records the question as cancelled, saying so.
        """
        schema = dict(requested_schema or {})
        q = PendingQuestion(
            question_id=f"q_{uuid.uuid4().hex[:12]}",
            session_id=session_id,
            ancestors=ancestors,
            run_id=run_id,
            server=server,
            message=message[:MAX_MESSAGE_CHARS],
            requested_schema=schema if mode == "form" else {},
            mode=mode,
            url=url if mode == "url" else "",
        )
        refusal = self._refusal(q, headless)
        if refusal is None:
            self.pending[q.question_id] = q
        await self.log.append(
            QuestionAsked(
                session_id=session_id,
                run_id=run_id,
                question_id=q.question_id,
                server=server,
                message=q.message,
                requested_schema=q.requested_schema if len(str(q.requested_schema)) <= MAX_SCHEMA_CHARS else {},
                mode=mode,
                url=q.url,
            )
        )
        if refusal is not None:
            await self._close(q, "decline", None, "loom", refusal)
            return q
        try:
            with anyio.move_on_after(self.timeout_s):
                await q.done.wait()
            if q.action is None:
                minutes = self.timeout_s / 60
                waited = f"{minutes:g} minutes" if self.timeout_s >= 60 else f"{self.timeout_s:g} s"
                await self._close(q, "cancel", None, "loom", f"nobody answered within {waited}, so Loom cancelled it")
        except anyio.get_cancelled_exc_class():
            if q.action is None:
                with anyio.CancelScope(shield=True):
                    await self._close(q, "cancel", None, "loom", "the tool call that asked it ended first")
            raise
        finally:
            self.pending.pop(q.question_id, None)
        return q

    def _refusal(self, q: PendingQuestion, headless: bool) -> str | None:
        """Why ``q`` is declined without being shown to anybody, or None."""
        if headless:
            return HEADLESS_REASON
        if len(self.open_questions(q.session_id)) >= MAX_OPEN_PER_SESSION:
            return f"the session already has {MAX_OPEN_PER_SESSION} open questions; Loom declined one more"
        if q.mode == "url":
            return None if q.url.startswith(("https://", "http://")) else "the server's URL is not an http(s) URL"
        if len(str(q.requested_schema)) > MAX_SCHEMA_CHARS:
            return "the server's requested schema is too large to show"
        try:
            jsonschema.validators.validator_for(q.requested_schema).check_schema(q.requested_schema)
        except jsonschema.exceptions.SchemaError as exc:
            return f"the server's requested schema is not valid JSON Schema ({exc.message})"
        return None

    async def answer(
        self, question_id: str, action: str, content: Mapping[str, Any] | None, answered_by: str
    ) -> PendingQuestion:
        """Answer an open question; the first answer wins.

        ``accept`` in form mode needs ``content`` matching the question's schema; ``decline`` and ``cancel`` (and
        url mode) take none. A refused answer leaves the question open.

        Raises:
            QuestionError: unknown or answered question, unknown action, or content that does not fit.
        """
        q = self.question(question_id)
        if action not in ACTIONS:
            raise QuestionError(f"unknown action {action!r}; use accept, decline or cancel")
        kept: dict[str, Any] | None = None
        if action == "accept" and q.mode == "form":
            kept = _checked(q, content)
        await self._close(q, action, kept, answered_by, "")
        return q

    async def _close(
        self, q: PendingQuestion, action: Action, content: dict[str, Any] | None, by: str, reason: str
    ) -> None:
        q.action, q.content, q.answered_by, q.reason = action, content, by, reason
        q.done.set()
        await self.log.append(
            QuestionAnswered(
                session_id=q.session_id,
                run_id=q.run_id,
                question_id=q.question_id,
                action=action,
                content=content,
                answered_by=by,
                reason=reason,
            )
        )


def _checked(q: PendingQuestion, content: Mapping[str, Any] | None) -> dict[str, Any]:
    """``content`` if it answers ``q``'s form, else a QuestionError saying what does not fit."""
    if content is None:
        raise QuestionError(
            f"accepting question {q.question_id} needs content: an object matching the schema the server asked for "
            f"({_fields(q.requested_schema)}); the question stays open"
        )
    value = dict(content)
    for key, item in value.items():
        # What an elicitation answer may carry (MCP: primitives or a list of strings), whatever the schema says.
        if not (item is None or isinstance(item, str | int | float | bool)) and not (
            isinstance(item, list) and all(isinstance(s, str) for s in item)
        ):
            raise QuestionError(
                f"{key}: an answer holds only text, numbers, true/false or a list of text; the question stays open"
            )
    validator = jsonschema.validators.validator_for(q.requested_schema)(q.requested_schema)
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    if errors:
        parts = []
        for err in errors[:3]:
            where = "/".join(str(p) for p in err.absolute_path)
            parts.append(f"{where}: {err.message}" if where else err.message)
        raise QuestionError(
            f"the answer does not match what {q.server} asked for: {'; '.join(parts)}; the question stays open"
        )
    return value


def _fields(schema: Mapping[str, Any]) -> str:
    properties = schema.get("properties")
    names = list(properties) if isinstance(properties, dict) else []
    return "fields: " + ", ".join(names) if names else "no fields named"
