"""The loop's one seam for effects: every model call and tool call is a journalled step.

The agent loop (:mod:`orchestrator.loop.loop`) and the resume (:mod:`orchestrator.loop.resume`) never call a
model or a tool themselves; they ask ``ctx.steps``. Between steps they only decide (policy, which
call comes next), so a durable execution engine can replace :class:`EmbeddedSteps` with its own
steps (a DBOS ``@DBOS.step``, a Temporal activity) without a second agent loop. See
/docs/architecture.md and the durable-seam note it cites.

In the embedded journal a step's record is an event: a model step's result is the
``assistant_message`` that the loop stores, in one batch with the starts of the calls it approves,
before anything else happens; a tool step stores its ``tool_call_finished`` as soon as it returns.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from orchestrator.events import TextDelta, ToolCallDelta, ToolCallFinished, ToolCallStarted, ToolProgress
from orchestrator.hub.client_caps import SessionClientHooks
from orchestrator.hub.outcomes import ToolOutcome
from orchestrator.messages import ToolUseBlock
from orchestrator.models.base import Model, ModelError, ModelRequest, ModelResponse, ToolSpec
from orchestrator.models.base import TextDelta as ModelTextDelta
from orchestrator.models.base import ToolCallDelta as ModelToolCallDelta

if TYPE_CHECKING:
    from orchestrator.loop.loop import RunContext


class Steps(Protocol):
    """Where the loop's effects happen."""

    concurrent: bool
    """Whether the calls (and approvals) of one step may be in flight together. A durable engine that numbers its
    steps in the order they are asked for needs them one after the other, so that a replay asks in the same order."""

    async def model(self, ctx: RunContext, tools: Sequence[ToolSpec]) -> tuple[ModelResponse, float]:
        """One model call on ``ctx.history``; returns the response and how long it took (ms).

        Raises:
            orchestrator.models.base.ModelError: the call failed for good.
        """
        ...

    async def tool(self, ctx: RunContext, use: ToolUseBlock) -> ToolOutcome:
        """Run one approved tool call (its start is already journalled) and journal its result."""
        ...

    async def complete(self, ctx: RunContext, request: ModelRequest) -> ModelResponse:
        """A model call outside the conversation (a compaction's summary): nothing is streamed to clients.

        Raises:
            orchestrator.models.base.ModelError: the call failed for good.
        """
        ...


class EmbeddedSteps:
    """Steps in this process, journalled in Loom's own event log."""

    concurrent = True

    async def model(self, ctx: RunContext, tools: Sequence[ToolSpec]) -> tuple[ModelResponse, float]:
        """See :meth:`Steps.model`; the text and tool arguments are streamed to live subscribers as they come.

        The deltas are published, never stored: the step's record is the ``assistant_message`` made of the response.
        """
        started = time.perf_counter()
        request = ModelRequest(system=ctx.system, messages=ctx.history, tools=list(tools))
        response: ModelResponse | None = None
        async for event in ctx.model.stream(request):
            if isinstance(event, ModelTextDelta):
                ctx.log.publish_live(
                    TextDelta(session_id=ctx.session_id, run_id=ctx.run_id, step=ctx.step, text=event.text)
                )
            elif isinstance(event, ModelToolCallDelta):
                ctx.log.publish_live(
                    ToolCallDelta(
                        session_id=ctx.session_id,
                        run_id=ctx.run_id,
                        step=ctx.step,
                        index=event.index,
                        call_id=event.call_id,
                        name=event.name,
                        arguments=event.arguments,
                    )
                )
            else:
                response = event
        if response is None:
            raise ModelError(f"{ctx.model.name} ended its stream without a response", transient=True)
        return response, ms_since(started)

    async def complete(self, ctx: RunContext, request: ModelRequest) -> ModelResponse:
        """See :meth:`Steps.complete`; its record is the event the caller makes of the answer."""
        return await complete(ctx.model, request)

    async def tool(self, ctx: RunContext, use: ToolUseBlock) -> ToolOutcome:
        """See :meth:`Steps.tool`."""
        started = time.perf_counter()

        async def report(progress: float, total: float | None, message: str | None) -> None:
            # Live only: a follower sees the call moving; the store keeps its result, not each report.
            ctx.log.publish_live(
                ToolProgress(
                    session_id=ctx.session_id,
                    run_id=ctx.run_id,
                    call_id=use.id,
                    tool=use.name,
                    progress=progress,
                    total=total,
                    message=(message or "")[:500],
                )
            )

        hooks, tool = ctx.hub.client_hooks, ctx.hub.tool(use.name)
        with contextlib.ExitStack() as calling:
            if isinstance(hooks, SessionClientHooks) and tool is not None:
                # What the server asks while serving this call (a question, a sampling request) is this run's.
                calling.enter_context(hooks.calling(tool.server, ctx.run_id, use.id, use.name))
            outcome = await ctx.hub.dispatch(use.name, use.input, progress=report)
        await ctx.log.append(finished_event(ctx, use, outcome, ms_since(started)))
        return outcome


async def complete(model: Model, request: ModelRequest) -> ModelResponse:
    """Run one model call to its response, ignoring the deltas (no one watches a summary being written)."""
    response: ModelResponse | None = None
    async for event in model.stream(request):
        if isinstance(event, ModelResponse):
            response = event
    if response is None:
        raise ModelError(f"{model.name} ended its stream without a response", transient=True)
    return response


def started_event(ctx: RunContext, use: ToolUseBlock) -> ToolCallStarted:
    """The journal entry for a call about to be sent to its server."""
    return ToolCallStarted(
        session_id=ctx.session_id, run_id=ctx.run_id, step=ctx.step, call_id=use.id, tool=use.name, arguments=use.input
    )


def finished_event(ctx: RunContext, use: ToolUseBlock, outcome: ToolOutcome, duration_ms: float) -> ToolCallFinished:
    """The journal entry for a call's result (or its refusal, which never started)."""
    return ToolCallFinished(
        session_id=ctx.session_id,
        run_id=ctx.run_id,
        step=ctx.step,
        call_id=use.id,
        tool=use.name,
        is_error=outcome.is_error,
        failure=outcome.failure,
        content=outcome.content,
        structured=outcome.structured,
        duration_ms=duration_ms,
        attachments=list(outcome.attachments),
    )


def ms_since(start: float) -> float:
    """Milliseconds since ``start`` (a ``time.perf_counter`` reading), to the microsecond."""
    return round((time.perf_counter() - start) * 1000, 3)
