"""Runs as MCP tasks: the ``io.modelcontextprotocol/tasks`` extension (SEP-2663) on the face.

Spec followed: SEP-2663 as published in modelcontextprotocol/experimental-ext-tasks,
``docs/specification/draft/tasks.mdx`` and ``schema/draft/schema.ts`` (the text that
modelcontextprotocol/modelcontextprotocol ``seps/2663-tasks-extension.md`` and ``docs/extensions/tasks/overview.mdx``
point to): a flat ``CreateTaskResult`` (``resultType: "task"``, ``taskId``, ``status``, ``statusMessage``,
``createdAt``, ``lastUpdatedAt``, ``ttlMs``, ``pollIntervalMs``); ``tasks/get`` inlining ``result`` /
``inputRequests``; ``tasks/update`` delivering ``inputResponses``; ``tasks/cancel`` acknowledged with an empty
result; an unknown ``taskId`` is ``-32602``; no ``tasks/result``, no ``tasks/list``, no ``requestState``.

Above: a 2026-07-28 client that declares the extension in a request's ``clientCapabilities``. Below: the
:class:`~orchestrator.runtime.host.SessionHost`. A task is a run: ``send_message`` (and ``resume_run``) answer
with a task instead of the handle-based :class:`~orchestrator.protocol.RunInfo`; a run waiting for an approval is
``input_required`` with one elicitation per approval (its key the approval id), answered through ``tasks/update``;
``tasks/cancel`` cancels the run. ``orchestrate`` answers likewise with a task for its orchestration (the result is
its final :class:`~orchestrator.agents.report.Report`; its children's approvals are its input). Clients that do not
declare the extension get the plain tools, unchanged.

The task id is ``RUN_ID.MAC``: an HMAC of the run id under a key kept in Loom's home (``tasks.key``, 0600). It is
derived, so it needs no table of its own, survives restarts with the run, and cannot be guessed from a run id.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pydantic_core
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolRequestParams, CallToolResult, RequestParams, TextContent
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field, ValidationError

from orchestrator.agents.report import Report
from orchestrator.events import OrchestrationStarted
from orchestrator.face.caller import caller_name
from orchestrator.loop.approvals import PendingApproval
from orchestrator.protocol import ApprovalAnswer, RunInfo
from orchestrator.runtime.host import HostError, SessionHost

__all__ = ["IDENTIFIER", "KEY_FILE", "RunTasks", "TaskIds"]

IDENTIFIER = "io.modelcontextprotocol/tasks"
"""The extension's identifier, in ``clientCapabilities.extensions`` and ``server/discover``'s capabilities."""
TASK_TOOLS = frozenset({"send_message", "resume_run", "orchestrate"})
"""The face's tools that answer with a task when the request declared the extension."""
_ORCHESTRATION = "o"
"""A task's subject is a run id, or ``o.SESSION_ID.ORCHESTRATION_ID`` for an orchestration (ids hold no dots)."""
KEY_FILE = "tasks.key"
"""The file in Loom's home holding the key task ids are derived with."""
POLL_INTERVAL_MS = 1000
RECORD_WAIT_S = 10.0
"""How long a tool call waits for its run to be stored before answering (past it: the plain result, no task)."""

_STATUS_MESSAGES = {
    "queued": "queued behind another run of the session",
    "running": "running",
    "interrupted": "interrupted; resume_run with the run_id continues it",
    "needs_review": "stopped for a review; resume_run with the run_id asks again",
}
_APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decision": {
            "type": "string",
            "enum": ["approve_once", "approve_session", "deny"],
            "description": "approve_session: this tool for the rest of the session",
        },
        "reason": {"type": "string", "description": "shown to the model when you deny"},
    },
    "required": ["decision"],
}


class TaskParams(RequestParams):
    """``tasks/get`` and ``tasks/cancel`` params."""

    task_id: str = Field(max_length=200)


class UpdateTaskParams(TaskParams):
    """``tasks/update`` params: answers keyed by the ``inputRequests`` keys they answer."""

    input_responses: dict[str, dict[str, Any]] = Field(default_factory=dict)


class TaskIds:
    """Task ids derived from run ids: ``RUN_ID.MAC``, unguessable without the key in Loom's home."""

    def __init__(self, home: Path) -> None:
        self._path = home / KEY_FILE
        self._key: bytes | None = None
        self._lock = anyio.Lock()

    async def mint(self, subject: str) -> str:
        """The task id of ``subject`` (the same every time, in every process sharing the home)."""
        return f"{subject}.{self._mac(await self._loaded(), subject)}"

    async def subject_of(self, task_id: str) -> str | None:
        """What ``task_id`` stands for (a run id, or an orchestration), or None when this Loom never issued it."""
        subject, dot, mac = task_id.rpartition(".")
        if not dot or not subject:
            return None
        return subject if hmac.compare_digest(mac, self._mac(await self._loaded(), subject)) else None

    @staticmethod
    def _mac(key: bytes, subject: str) -> str:
        digest = hmac.new(key, b"loom-task:" + subject.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest[:24]).decode()  # 192 bits

    async def _loaded(self) -> bytes:
        if self._key is None:
            async with self._lock:
                if self._key is None:
                    self._key = await anyio.to_thread.run_sync(_load_or_create, self._path)
        return self._key


def _load_or_create(path: Path) -> bytes:
    """The key at ``path``, created (0600, synced) by whichever process comes first."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        key = path.read_bytes()
        if len(key) < 32:
            raise RuntimeError(
                f"{path} is damaged (under 32 bytes); delete it (tasks issued so far are lost)"
            ) from None
        return key
    key = secrets.token_bytes(32)
    try:
        os.write(fd, key)
        os.fsync(fd)  # a task id handed out must still resolve after a crash
    finally:
        os.close(fd)
    return key


class RunTasks(Extension):
    """The tasks extension over a host's runs (see the module docstring)."""

    identifier = IDENTIFIER

    def __init__(self, host: SessionHost) -> None:
        self._host = host
        self._ids = TaskIds(host.runtime.home)
        self._created: dict[str, float] = {}
        """When each orchestration task began, once looked up (its start event is in the session's log)."""

    def methods(self) -> list[MethodBinding]:
        """``tasks/get``, ``tasks/update`` and ``tasks/cancel``, for 2026-07-28 requests only."""
        modern = frozenset(MODERN_PROTOCOL_VERSIONS)
        return [
            MethodBinding("tasks/get", TaskParams, self._get, modern),
            MethodBinding("tasks/update", UpdateTaskParams, self._update, modern),
            MethodBinding("tasks/cancel", TaskParams, self._cancel, modern),
        ]

    async def intercept_tool_call(
        self, params: CallToolRequestParams, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """Answer a run-starting tool with a task, when (and only when) this request declared the extension."""
        if params.name not in TASK_TOOLS or not _declared(ctx):
            return await call_next(ctx)
        # The tool runs with these very params: it returns at once, and the task is what the client waits on.
        params.arguments = {**(params.arguments or {}), "wait_s": 0}
        result = await call_next(ctx)
        structured = result.structured_content if isinstance(result, CallToolResult) else None
        if not isinstance(result, CallToolResult) or result.is_error or not structured:
            return result  # refused before any run began: the error is the answer
        if params.name == "orchestrate":  # its start is stored before the tool answers
            subject = f"{_ORCHESTRATION}.{params.arguments['session_id']}.{structured['orchestration_id']}"
            self._created.setdefault(subject, datetime.now(UTC).timestamp())
        else:
            subject, session_id = str(structured["run_id"]), str(structured["session_id"])
            if not await self._recorded(subject, session_id):
                return result  # not stored in time: a task must exist before it is announced, the handle does
        detailed = await self._detailed(await self._ids.mint(subject), subject)
        for inlined in ("result", "error", "inputRequests"):  # a CreateTaskResult carries none of them
            detailed.pop(inlined, None)
        if detailed["status"] == "input_required":
            detailed["status"] = "working"  # tasks/get shows the approvals it waits for
        return {"resultType": "task", **detailed}

    async def _recorded(self, run_id: str, session_id: str) -> bool:
        """Wait (bounded) until the run is in the store, so a tasks/get for it resolves even after a crash."""
        log = self._host.runtime.log
        with anyio.move_on_after(RECORD_WAIT_S):
            while True:
                change = log.watch(session_id)  # taken before the read: a store landing during it still wakes us
                if await log.store.get_run(run_id) is not None:
                    return True
                await change.wait()
        return False

    async def _subject(self, task_id: str) -> str:
        subject = await self._ids.subject_of(task_id)
        if subject is None:
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"Failed to retrieve task: no task {task_id[:200]!r} (unknown, or not issued by this Loom)",
            )
        return subject

    async def _get(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> dict[str, Any]:
        return await self._detailed(params.task_id, await self._subject(params.task_id))

    async def _update(self, ctx: ServerRequestContext[Any, Any], params: UpdateTaskParams) -> dict[str, Any]:
        subject = await self._subject(params.task_id)
        # Only what this task waits for may be answered through it; other keys are ignored, as the spec says.
        outstanding = {p.approval_id: p for p in self._waiting(subject)}
        who = caller_name(ctx.meta, ctx.session)
        # Every answer is checked before any is applied: a malformed one refuses the whole update.
        answers = {key: _decision(key, r, who) for key, r in params.input_responses.items() if key in outstanding}
        for key, (decision, reason) in answers.items():
            try:
                await self._host.decide(key, decision, reason, who)
            except HostError:
                continue  # decided meanwhile by another client: the first decision wins
        return {}

    async def _cancel(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> dict[str, Any]:
        subject = await self._subject(params.task_id)
        try:
            if subject.startswith(f"{_ORCHESTRATION}."):
                _, session_id, orchestration_id = subject.split(".")
                await self._host.orchestrations.cancel(
                    session_id, orchestration_id, "cancelled by a client (tasks/cancel)"
                )
            else:
                await self._host.cancel(subject)
        except HostError:
            pass  # nothing to cancel: the acknowledgement is all the spec asks
        return {}

    def _waiting(self, subject: str) -> list[PendingApproval]:
        """The approvals the task waits for: its run's (and its children's), or its orchestration children's."""
        if subject.startswith(f"{_ORCHESTRATION}."):
            session_id = subject.split(".")[1]
            return [p for p in self._host.pending(session_id=session_id) if p.session_id != session_id]
        return self._host.pending_under(subject)

    async def _detailed(self, task_id: str, subject: str) -> dict[str, Any]:
        """The task as tasks/get shows it: status, times, and the result or the input it needs."""
        if subject.startswith(f"{_ORCHESTRATION}."):
            return await self._orchestration(task_id, subject)
        host, run_id = self._host, subject
        try:
            view = await host.view(run_id)
        except HostError:
            raise MCPError(code=INVALID_PARAMS, message=f"Failed to retrieve task: run {run_id!r} is gone") from None
        record = await host.runtime.log.store.get_run(run_id)
        started = record.started if record is not None else datetime.now(UTC).timestamp()
        updated = record.finished if record is not None and record.finished is not None else None
        pending = host.pending_under(run_id) if view.status not in ("completed", "failed", "cancelled") else []
        task: dict[str, Any] = {
            "taskId": task_id,
            "status": "working",
            "createdAt": _iso(started),
            "lastUpdatedAt": _iso(updated or self._newest_change(view.session_id) or started),
            "ttlMs": None,  # runs are archived, never deleted: a task lives as long as its run
            "pollIntervalMs": POLL_INTERVAL_MS,
        }
        if view.status in ("completed", "failed"):
            # A failed run is a tool result like any other (the RunInfo says failed): "failed" is for JSON-RPC errors.
            info = RunInfo(
                run_id=view.run_id,
                session_id=view.session_id,
                status=view.status,
                reason=view.reason,
                final_text=view.final_text,
            )
            task.update(status="completed", statusMessage=view.reason or view.status, result=_tool_result(info))
        elif view.status == "cancelled":
            task.update(status="cancelled", statusMessage=view.reason or "cancelled")
        elif pending:
            task.update(
                status="input_required",
                statusMessage=f"waiting for {len(pending)} approval(s)",
                inputRequests={p.approval_id: _elicitation(p) for p in pending},
            )
        else:
            task["statusMessage"] = _STATUS_MESSAGES.get(view.status, view.status)
        return task

    async def _orchestration(self, task_id: str, subject: str) -> dict[str, Any]:
        _, session_id, orchestration_id = subject.split(".")
        try:
            report = await self._host.orchestrations.snapshot(session_id, orchestration_id)
        except HostError:
            raise MCPError(
                code=INVALID_PARAMS, message=f"Failed to retrieve task: {orchestration_id!r} is gone"
            ) from None
        created = self._created.get(subject)
        if created is None:
            events = await self._host.runtime.log.store.read_events(session_id)
            starts = [
                e.ts for e in events if isinstance(e, OrchestrationStarted) and e.orchestration_id == orchestration_id
            ]
            created = self._created[subject] = starts[0] if starts else datetime.now(UTC).timestamp()
        ended = report.status in ("passed", "failed", "cancelled")
        pending = [] if ended else self._waiting(subject)
        task: dict[str, Any] = {
            "taskId": task_id,
            "status": "working",
            "statusMessage": report.text().splitlines()[0],
            "createdAt": _iso(created),
            "lastUpdatedAt": _iso(self._newest_change(session_id) or created),
            "ttlMs": None,
            "pollIntervalMs": POLL_INTERVAL_MS,
        }
        if report.status in ("passed", "failed"):  # a failed graph is a result, as the tool's own answer is
            task.update(status="completed", result=_tool_result(report))
        elif report.status == "cancelled":
            task["status"] = "cancelled"
        elif pending:
            task.update(status="input_required", inputRequests={p.approval_id: _elicitation(p) for p in pending})
        return task

    def _newest_change(self, session_id: str) -> float | None:
        log = self._host.runtime.log
        newest = log.newest_held(session_id)
        held = log.stored_since(session_id, newest - 1, 1) if newest else None
        return held[-1].ts if held else None


def _declared(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether this request (2026-07-28, its own clientCapabilities) declared the tasks extension."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False  # handshake-era capabilities are the session's, and that wire has no task results
    capabilities = ctx.session.client_capabilities
    return bool(capabilities is not None and capabilities.extensions and IDENTIFIER in capabilities.extensions)


def _decision(key: str, response: dict[str, Any], who: str) -> tuple[str, str]:
    """The approval decision an elicitation answer gives; declining or dismissing it denies (never allows).

    Raises:
        MCPError: an accepted answer without a valid decision.
    """
    action = response.get("action")
    if action in ("decline", "cancel"):
        return "deny", f"{who} {'declined' if action == 'decline' else 'dismissed'} the approval"
    if action != "accept":
        raise MCPError(
            code=INVALID_PARAMS,
            message=f"inputResponses[{key!r}].action must be accept, decline or cancel, not {action!r}",
        )
    try:
        answer = ApprovalAnswer.model_validate(response.get("content") or {})
    except ValidationError:
        raise MCPError(
            code=INVALID_PARAMS,
            message=f"inputResponses[{key!r}].content.decision must be approve_once, approve_session or deny",
        ) from None
    return answer.decision, answer.reason


def _elicitation(p: PendingApproval) -> dict[str, Any]:
    arguments = json.dumps(p.arguments, ensure_ascii=False)[:500]
    what = "run again the interrupted call" if p.kind == "review" else "run"
    return {
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": f"Loom asks to {what} {p.tool} {arguments} ({p.reason}). Decide:",
            "requestedSchema": _APPROVAL_SCHEMA,
        },
    }


def _tool_result(info: RunInfo | Report) -> dict[str, Any]:
    """The CallToolResult the handle-based tools answer with for ``info`` (same text, same structured content)."""
    result = CallToolResult(
        content=[TextContent(type="text", text=pydantic_core.to_json(info, indent=2).decode())],
        structured_content=info.model_dump(mode="json", by_alias=True),
    )
    dumped: dict[str, Any] = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped


def _iso(ts: float) -> str:
    # One width always (a whole second would otherwise drop its fraction), so the strings also sort as times.
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
