"""``spawn`` and ``send`` answered with an MCP task (the ``io.modelcontextprotocol/tasks`` extension, SEP-2663).

A 2026-07-28 caller that declares the extension in its request's ``clientCapabilities`` gets, for ``spawn`` or
``send``, the task the FACE gives for the child's run (the face answers ``send_message`` with one, see
``orchestrator/face/tasks.py``) instead of the ``Spawned`` handle; ``tasks/get``, ``tasks/update`` and
``tasks/cancel`` on this server are the face's, forwarded. Everything else the tool does (checking the child is
this server's, the bound on children going at once, tracking its run for wait/result) is unchanged: the tool runs
as always, and only its ``send_message`` goes through a face client that declares the extension.

A caller that does not declare it (a session's model, through its hub) gets the plain tools. The extension is
installed only when the server is given a connection that declares it (``loom server subagents``; not the hub).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, Literal

from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, RequestParams, Result
from mcp_types import Request
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ConfigDict, Field

from clients.loom import FaceError, LoomClient
from orchestrator.protocol import RunInfo

__all__ = ["IDENTIFIER", "TASK_TOOLS", "ChildTasks", "FaceTask", "TaskResults", "send_run"]

IDENTIFIER = "io.modelcontextprotocol/tasks"
"""The extension's identifier (the face's: the tasks are its)."""
TASK_TOOLS = frozenset({"spawn", "send"})
"""The tools that start a run of one child, answered with that run's task when the request declared the extension."""

OpenFace = Callable[[], AbstractAsyncContextManager[LoomClient]]


class FaceTask(Result):
    """A task the face answered with (kept whole: this server hands it on as it is)."""

    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"] = Field("task", alias="resultType")
    task_id: str = Field(alias="taskId")


class _Forwarded(Result):
    model_config = ConfigDict(extra="allow")


async def _unresolved(created: FaceTask, ctx: ClaimContext) -> CallToolResult:
    raise RuntimeError("a face task is handed on, never resolved here")  # only allow_claimed calls are made


class TaskResults(ClientExtension):
    """Declares the extension on a face client, and accepts the face's task results (``allow_claimed`` calls)."""

    identifier = IDENTIFIER

    def claims(self) -> list[ResultClaim[Any]]:
        """The face's task result on ``tools/call``."""
        return [ResultClaim(result_type="task", model=FaceTask, resolve=_unresolved)]


class _TaskParams(RequestParams):
    model_config = ConfigDict(extra="allow")  # tasks/update's inputResponses go on to the face as they came
    task_id: str = Field(alias="taskId", max_length=200)


class _TaskRequest(Request[_TaskParams, str]):
    name_param = "taskId"  # SEP-2663: the task id travels in Mcp-Name too


_TASK: contextvars.ContextVar[list[dict[str, Any]] | None] = contextvars.ContextVar("subagents_task", default=None)
"""Set while a declaring request's spawn or send runs: where its send_message leaves the face's task."""


async def send_run(
    loom: LoomClient, open_tasks: OpenFace | None, session_id: str, text: str, *, max_steps: int, timeout_s: float
) -> RunInfo:
    """Start a run of ``session_id``: as a face task when the request being served asked for one, else plainly.

    Raises:
        FaceError: the face refused the run.
    """
    wanted = _TASK.get()
    if wanted is None or open_tasks is None:
        return await loom.send_message(session_id, text, max_steps=max_steps, timeout_s=timeout_s)
    arguments = {"session_id": session_id, "text": text, "max_steps": max_steps, "timeout_s": timeout_s}
    async with open_tasks() as declaring:
        answer = await declaring.session.session.call_tool("send_message", arguments, allow_claimed=True)
        if not isinstance(answer, FaceTask):  # refused, or not stored in time: the face's plain answer stands
            if not isinstance(answer, CallToolResult) or answer.is_error or answer.structured_content is None:
                content = answer.content if isinstance(answer, CallToolResult) else []
                text = " ".join(getattr(b, "text", "") for b in content).strip()
                raise FaceError(text.removeprefix("Error executing tool send_message: ") or "send_message failed", "")
            return RunInfo.model_validate(answer.structured_content)
        # The face's task id is RUN_ID.MAC: the run is read back under it, which also proves the reading right.
        run = await declaring.get_run(answer.task_id.rpartition(".")[0])
    wanted.append(answer.model_dump(mode="json", by_alias=True, exclude_none=True))
    return run


def _declared(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether this request (2026-07-28, its own clientCapabilities) declared the tasks extension."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    capabilities = ctx.session.client_capabilities
    return bool(capabilities is not None and capabilities.extensions and IDENTIFIER in capabilities.extensions)


class ChildTasks(Extension):
    """The tasks extension on the subagents server: spawn and send as the face's tasks (see the module docstring).

    Args:
        open_tasks: opens a face client that declares the extension.
    """

    identifier = IDENTIFIER

    def __init__(self, open_tasks: OpenFace) -> None:
        self._open = open_tasks

    def methods(self) -> list[MethodBinding]:
        """``tasks/get``, ``tasks/update`` and ``tasks/cancel``, forwarded to the face (2026-07-28 only)."""
        modern = frozenset(MODERN_PROTOCOL_VERSIONS)
        return [
            MethodBinding(m, _TaskParams, self._forward(m), modern)
            for m in ("tasks/get", "tasks/update", "tasks/cancel")
        ]

    async def intercept_tool_call(
        self, params: Any, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """Run spawn or send as always; a declaring request gets the face's task for the run it started."""
        if params.name not in TASK_TOOLS or not _declared(ctx):
            return await call_next(ctx)
        created: list[dict[str, Any]] = []
        token = _TASK.set(created)
        try:
            result = await call_next(ctx)
        finally:
            _TASK.reset(token)
        if not created or (isinstance(result, CallToolResult) and result.is_error):
            return result  # refused, or the face gave no task: the tool's own answer is the answer
        return created[0]

    def _forward(self, method: str) -> Callable[[ServerRequestContext[Any, Any], _TaskParams], Any]:
        async def forward(ctx: ServerRequestContext[Any, Any], params: _TaskParams) -> dict[str, Any]:
            sent = params.model_dump(mode="json", by_alias=True, exclude_none=True)
            sent.pop("_meta", None)  # the face's client stamps its own envelope
            failure: MCPError | None = None
            async with self._open() as face:
                try:
                    answer = await face.session.session.send_request(
                        _TaskRequest(method=method, params=_TaskParams.model_validate(sent)), _Forwarded
                    )
                except MCPError as exc:  # raised once the connection is closed, or it comes out wrapped
                    failure = exc
            if failure is not None:
                raise failure
            dumped: dict[str, Any] = answer.model_dump(mode="json", by_alias=True, exclude_none=True)
            dumped.pop("_meta", None)
            return dumped

        return forward
