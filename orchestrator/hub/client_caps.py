"""Loom as a full MCP client: what a session answers when a server it connects asks something of it.

Below this are the SDK's ``Client`` callbacks; the hub (:mod:`orchestrator.hub.pool`) passes
``client_options(server)`` into every external ``Client`` it opens, so each server is told who Loom is
(``clientInfo``) and gets, in both protocol eras (the SDK drives 2026-07-28 ``input_required`` rounds through
the same callbacks as handshake-era server requests):

- roots: the session's working directory, as a ``file://`` URI;
- elicitation: a question on the session's stream (:mod:`orchestrator.runtime.questions`) that any attached
  client answers, form or url mode; a headless session declines at once, saying why;
- sampling: the session's model answers, once the session's approvals allow the pseudo-tool ``SERVER__sampling``
  (so a person's allow or deny rule in policy covers it; a headless run with no rule denies, saying so);
- logging: every message goes to the server's log file (``$LOOM_HOME/logs/NAME.log``, where a stdio server's
  stderr goes too), and those at warning and above to the stream as ``server_log`` events.

Above this the runtime makes one :class:`SessionClientHooks` per session. The hub is built before the session,
so the session is bound late (:meth:`SessionClientHooks.bind`); a request that comes before is declined. Which
run and tool call a request belongs to is known from the calls in flight to that server
(:meth:`SessionClientHooks.calling`, entered around each tool call by :mod:`orchestrator.loop.steps`).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import anyio.to_thread
from mcp import types as mt
from mcp.client.session import ClientRequestContext

from orchestrator.events import ServerLog
from orchestrator.hub.names import sanitize
from orchestrator.runtime.questions import QuestionDesk
from orchestrator.store.eventlog import EventLog
from servers._version import loom_version

if TYPE_CHECKING:
    from orchestrator.runtime.session import Session

__all__ = ["CLIENT_NAME", "LOG_LEVEL", "ClientHooks", "InFlight", "SessionClientHooks", "loom_client_info"]

CLIENT_NAME = "loom"
LOG_LEVEL: mt.LoggingLevel = "info"
"""The level Loom opts in to on 2026-07-28 connections (handshake-era servers send every level unasked)."""
STREAM_LEVELS = frozenset({"warning", "error", "critical", "alert", "emergency"})
STREAM_LOGS_PER_MINUTE = 20
"""Warnings a server may put on the stream per minute; past it they go to its log file only (a flooding server)."""
MAX_LOG_CHARS = 2000
MAX_SAMPLING_TOKENS = 4096
"""The most a server's sampling request gets written, whatever ``maxTokens`` it asks for."""
SAMPLING = "sampling"
"""The pseudo-tool a server's sampling request is decided as: ``SERVER__sampling``."""


class ClientHooks(Protocol):
    """What the hub asks of its session when it opens a ``Client`` to an external server."""

    def client_options(self, server: str) -> dict[str, Any]:
        """Keyword arguments for ``mcp.Client(...)`` (never ``message_handler``: the hub's own)."""
        ...


def loom_client_info() -> mt.Implementation:
    """Who Loom says it is to a server."""
    return mt.Implementation(name=CLIENT_NAME, version=loom_version())


@dataclass(frozen=True, slots=True)
class InFlight:
    """A tool call a server is serving now: what its requests to the client belong to."""

    run_id: str
    call_id: str
    tool: str


class SessionClientHooks:
    """One session's answers to its servers' requests.

    Args:
        log: The runtime's event log.
        questions: The runtime's questions.
        cwd: The session's working directory (its one root).
        log_dir: Where servers' log files are (``$LOOM_HOME/logs``); None keeps no file.
    """

    def __init__(self, log: EventLog, questions: QuestionDesk, *, cwd: Path, log_dir: Path | None) -> None:
        self.log = log
        self.questions = questions
        self.cwd = cwd
        self._root = mt.Root(uri=cwd.absolute().as_uri(), name=cwd.name or "/")
        self.log_dir = log_dir
        self.session: Session | None = None
        self._calls: dict[str, list[InFlight]] = {}
        self._stream_budget: dict[str, tuple[float, int]] = {}

    def bind(self, session: Session) -> None:
        """The session these hooks answer for (built after its hub)."""
        self.session = session

    def client_options(self, server: str) -> dict[str, Any]:
        """See :meth:`ClientHooks.client_options`: client info, roots, elicitation, sampling and logging."""

        async def roots(context: ClientRequestContext) -> mt.ListRootsResult:
            return mt.ListRootsResult(roots=[self._root])

        async def elicit(context: ClientRequestContext, params: mt.ElicitRequestParams) -> mt.ElicitResult:
            return await self._elicit(server, params)

        async def sample(
            context: ClientRequestContext, params: mt.CreateMessageRequestParams
        ) -> mt.CreateMessageResult | mt.ErrorData:
            return await self._sample(server, params)

        async def logged(params: mt.LoggingMessageNotificationParams) -> None:
            await self._log(server, params)

        return {
            "client_info": loom_client_info(),
            "list_roots_callback": roots,
            "elicitation_callback": elicit,
            "sampling_callback": sample,
            "logging_callback": logged,
            "log_level": LOG_LEVEL,
        }

    @contextlib.contextmanager
    def calling(self, server: str, run_id: str, call_id: str, tool: str) -> Iterator[None]:
        """Around one tool call to ``server``: what it asks meanwhile belongs to this run and call."""
        call = InFlight(run_id, call_id, tool)
        self._calls.setdefault(server, []).append(call)
        try:
            yield
        finally:
            calls = self._calls.get(server, [])
            if call in calls:
                calls.remove(call)
            if not calls:
                self._calls.pop(server, None)

    def _current(self, server: str) -> InFlight | None:
        calls = self._calls.get(server)
        if calls:
            return calls[-1]
        # Asked outside any call of its own (a handshake-era server may ask at any time): the run going, if any.
        return next((c[-1] for c in self._calls.values() if c), None)

    # -- elicitation ---------------------------------------------------------------------------------

    async def _elicit(self, server: str, params: mt.ElicitRequestParams) -> mt.ElicitResult:
        session = self.session
        call = self._current(server)
        if session is None:
            return mt.ElicitResult(action="decline")
        url_mode = isinstance(params, mt.ElicitRequestURLParams)
        answered = await self.questions.ask(
            session_id=session.id,
            ancestors=session.lineage.ancestors,
            run_id=call.run_id if call is not None else "",
            server=server,
            message=params.message,
            requested_schema=None if isinstance(params, mt.ElicitRequestURLParams) else dict(params.requested_schema),
            mode="url" if url_mode else "form",
            url=params.url if isinstance(params, mt.ElicitRequestURLParams) else "",
            headless=session.approvals.headless,
        )
        action = answered.action or "cancel"
        return mt.ElicitResult(action=action, content=answered.content if action == "accept" else None)

    # -- sampling ------------------------------------------------------------------------------------

    async def _sample(
        self, server: str, params: mt.CreateMessageRequestParams
    ) -> mt.CreateMessageResult | mt.ErrorData:
        # Imported here: the hub's pool imports this module, and these import the pool.
        from orchestrator.hub.pool import HubTool
        from orchestrator.loop.steps import complete
        from orchestrator.models.base import ModelError, ModelRequest

        session = self.session
        if session is None:
            return _refused(f"Loom's session was not ready, so the sampling request from {server} was refused")
        call = self._current(server)
        messages = [_message(m) for m in params.messages]
        if not messages:
            return mt.ErrorData(code=mt.INVALID_PARAMS, message="a sampling request needs at least one message")
        name = f"{sanitize(server)}__{SAMPLING}"
        shown: dict[str, Any] = {
            "messages": [{"role": m.role, "text": m.text[:2000]} for m in messages],
            "system_prompt": (params.system_prompt or "")[:2000],
            "max_tokens": params.max_tokens,
        }
        tool = HubTool(name, server, SAMPLING, f"{server} asks the session's model to write a message", {}, None, None)
        verdict, why = session.approvals.verdict(tool, shown)
        if verdict == "deny":
            return _refused(f"Loom refused {server}'s sampling request: {why}")
        if verdict == "ask":
            reason = f"{server} asks the session's model ({session.model.name}) to write a message: {why}"
            call_id = call.call_id if call is not None else f"sampling_{uuid.uuid4().hex[:8]}"
            allowed, message = await session.approvals.ask(
                call.run_id if call is not None else "", call_id, name, shown, reason
            )
            if not allowed:
                return _refused(f"Loom refused {server}'s sampling request: {message}")
        request = ModelRequest(
            system=params.system_prompt or "", messages=messages, max_tokens=min(params.max_tokens, MAX_SAMPLING_TOKENS)
        )
        model = session.model
        try:
            response = await complete(model, request)
        except ModelError as exc:
            return mt.ErrorData(code=mt.INTERNAL_ERROR, message=f"the session's model failed: {exc}")
        stop: dict[str, str] = {"end_turn": "endTurn", "max_tokens": "maxTokens", "stop_sequence": "stopSequence"}
        return mt.CreateMessageResult(
            role="assistant",
            content=mt.TextContent(type="text", text=response.message.text),
            model=model.name,
            stop_reason=stop.get(response.stop_reason, response.stop_reason),
        )

    # -- logging -------------------------------------------------------------------------------------

    async def _log(self, server: str, params: mt.LoggingMessageNotificationParams) -> None:
        data = params.data
        text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, default=str)
        text = text[:MAX_LOG_CHARS]
        logger = (params.logger or "")[:200]
        if self.log_dir is not None:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            line = f"{stamp} [{params.level}]{' ' + logger if logger else ''}: {text}\n"
            path = self.log_dir / f"{server}.log"
            await anyio.to_thread.run_sync(_append, path, line)
        session = self.session
        if session is None or params.level not in STREAM_LEVELS or not self._may_stream(server):
            return
        await self.log.append(
            ServerLog(session_id=session.id, server=server, level=params.level, logger=logger, message=text)
        )

    def _may_stream(self, server: str) -> bool:
        now = time.monotonic()
        start, count = self._stream_budget.get(server, (now, 0))
        if now - start >= 60:
            start, count = now, 0
        self._stream_budget[server] = (start, count + 1)
        return count < STREAM_LOGS_PER_MINUTE


def _refused(message: str) -> mt.ErrorData:
    return mt.ErrorData(code=mt.INVALID_REQUEST, message=message)


def _message(sampled: mt.SamplingMessage) -> Any:
    """A server's sampling message as a conversation message (what is not text is named, not sent)."""
    from orchestrator.messages import Message, TextBlock

    parts: list[str] = []
    for block in sampled.content_as_list:
        if isinstance(block, mt.TextContent):
            parts.append(block.text)
        elif isinstance(block, mt.ImageContent | mt.AudioContent):
            parts.append(f"[{block.type}: {block.mime_type}, not shown]")
        else:
            parts.append(f"[{getattr(block, 'type', 'content')}, not shown]")
    return Message(role=sampled.role, content=[TextBlock(text="\n".join(parts) or "(empty)")])


def _append(path: Path, line: str) -> None:
    """Append one line to a server's log file (private, created 0600, no symlink followed)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with open(path, "a", encoding="utf-8", opener=lambda p, flags: os.open(p, flags | os.O_NOFOLLOW, 0o600)) as f:
        f.write(line)
