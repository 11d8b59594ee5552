"""The agent loop: stream the model, run the tools it asks for, feed the results back, repeat.

It sees the world through three things only: a :class:`~orchestrator.models.base.Model`, the
:class:`~orchestrator.hub.Hub` and the :class:`~orchestrator.eventlog.EventLog`. The history is one
list that grows by appending; nothing copies it per step, so a step costs the same at step 200 as at
step 2. Every effect is recorded before the next model call: the assistant message and the calls it
starts in one store batch, each result as it arrives.

:mod:`orchestrator.resume` reuses the call-handling steps (:func:`check_calls`, :func:`ask_calls`,
:func:`run_tools`) to finish an interrupted step, then hands the run back to :func:`run_loop`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import anyio
import anyio.lowlevel

from orchestrator.approvals import Approvals
from orchestrator.eventlog import EventLog
from orchestrator.events import ApprovalKind, AssistantMessage, RunStatus, TextDelta, ToolCallFinished, ToolCallStarted
from orchestrator.hub import Hub, ToolOutcome
from orchestrator.messages import Message, ToolResultBlock, ToolUseBlock
from orchestrator.models.base import Model, ModelError, ModelRequest, ModelResponse, ToolSpec
from orchestrator.models.base import TextDelta as ModelTextDelta


@dataclass(slots=True)
class RunContext:
    """Everything one run needs; the loop mutates ``history`` and ``step``."""

    session_id: str
    run_id: str
    model: Model
    hub: Hub
    log: EventLog
    system: str
    history: list[Message]
    max_steps: int
    step: int = 0
    approvals: Approvals | None = None
    """The session's approvals; None runs every valid call (no policy)."""


@dataclass(frozen=True, slots=True)
class LoopResult:
    """How the loop ended."""

    status: RunStatus
    reason: str
    final_text: str
    steps: int


async def run_loop(ctx: RunContext) -> LoopResult:
    """Run until the model stops asking for tools or ``max_steps`` model calls have been made.

    Raises:
        orchestrator.models.base.ModelError: a model call failed for good (after any retries).
        orchestrator.store.StoreError: the event log could not be written.
    """
    tools: list[ToolSpec] = [t.spec for t in ctx.hub.tools]
    final_text = ""
    while ctx.step < ctx.max_steps:
        # Event-log writes are shielded, so a cancel that lands during one is honoured here.
        await anyio.lowlevel.checkpoint_if_cancelled()
        ctx.step += 1
        response, model_ms = await _model_step(ctx, tools)
        message = response.message
        ctx.history.append(message)
        final_text = message.text or final_text
        uses = message.tool_uses
        approved, refused, to_ask = await check_calls(ctx, uses)
        assistant = AssistantMessage(
            session_id=ctx.session_id,
            run_id=ctx.run_id,
            step=ctx.step,
            message=message,
            stop_reason=response.stop_reason,
            usage=response.usage,
            duration_ms=model_ms,
        )
        refusals = [finished_event(ctx, use, outcome, 0.0) for use, outcome in refused]
        if not to_ask:  # the hot path: one store batch per step
            await ctx.log.append(assistant, *(started_event(ctx, use) for use in approved), *refusals)
        else:
            await ctx.log.append(assistant, *refusals)
            allowed, denied = await ask_calls(ctx, to_ask)
            approved = [u for u in uses if u in approved or u in allowed]
            refused.extend(denied)
            await ctx.log.append(
                *(started_event(ctx, use) for use in approved), *(finished_event(ctx, u, o, 0.0) for u, o in denied)
            )
        if not uses:
            await anyio.lowlevel.checkpoint_if_cancelled()
            return LoopResult("completed", response.stop_reason, final_text, ctx.step)
        results = await run_tools(ctx, uses, approved, refused)
        ctx.history.append(Message(role="user", content=list(results)))
    return LoopResult("failed", f"max_steps: stopped after {ctx.max_steps} model calls", final_text, ctx.step)


async def _model_step(ctx: RunContext, tools: list[ToolSpec]) -> tuple[ModelResponse, float]:
    """One model call, its text streamed live; returns the response and how long it took (ms)."""
    started = time.perf_counter()
    request = ModelRequest(system=ctx.system, messages=ctx.history, tools=tools)
    response: ModelResponse | None = None
    async for event in ctx.model.stream(request):
        if isinstance(event, ModelTextDelta):
            ctx.log.publish_live(
                TextDelta(session_id=ctx.session_id, run_id=ctx.run_id, step=ctx.step, text=event.text)
            )
        else:
            response = event
    if response is None:
        raise ModelError(f"{ctx.model.name} ended its stream without a response", transient=True)
    return response, _ms_since(started)


async def check_calls(
    ctx: RunContext, uses: list[ToolUseBlock]
) -> tuple[list[ToolUseBlock], list[tuple[ToolUseBlock, ToolOutcome]], list[tuple[ToolUseBlock, str]]]:
    """Sort the calls: may run, refused up front (unknown tool, bad arguments, policy), or to ask about."""
    approved: list[ToolUseBlock] = []
    refused: list[tuple[ToolUseBlock, ToolOutcome]] = []
    to_ask: list[tuple[ToolUseBlock, str]] = []
    for use in uses:
        problem = await ctx.hub.check(use.name, use.input)
        tool = ctx.hub.tool(use.name)
        if problem is not None or tool is None:
            refused.append((use, problem or ToolOutcome(f"unknown tool {use.name!r}", True, "unknown_tool")))
            continue
        verdict, why = ctx.approvals.verdict(tool, use.input) if ctx.approvals is not None else ("allow", "")
        if verdict == "allow":
            approved.append(use)
        elif verdict == "deny":
            refused.append((use, ToolOutcome(why, True, "denied")))
        else:
            to_ask.append((use, why))
    return approved, refused, to_ask


async def ask_calls(
    ctx: RunContext, to_ask: list[tuple[ToolUseBlock, str]], kind: ApprovalKind = "policy"
) -> tuple[list[ToolUseBlock], list[tuple[ToolUseBlock, ToolOutcome]]]:
    """Request every approval at once and wait (without a timeout) for all the decisions."""
    approvals = ctx.approvals
    assert approvals is not None
    allowed: list[ToolUseBlock] = []
    denied: list[tuple[ToolUseBlock, ToolOutcome]] = []

    async def one(use: ToolUseBlock, reason: str) -> None:
        ok, message = await approvals.ask(ctx.run_id, use.id, use.name, use.input, reason, kind)
        if ok:
            allowed.append(use)
        else:
            denied.append((use, ToolOutcome(message, True, "denied")))

    async with anyio.create_task_group() as tg:
        for use, reason in to_ask:
            tg.start_soon(one, use, reason)
    return allowed, denied


async def run_tools(
    ctx: RunContext,
    uses: list[ToolUseBlock],
    approved: list[ToolUseBlock],
    refused: list[tuple[ToolUseBlock, ToolOutcome]],
) -> list[ToolResultBlock]:
    """Run the approved calls concurrently; results come back in the order the model asked."""
    outcomes: dict[str, ToolOutcome] = {use.id: outcome for use, outcome in refused}

    async def one(use: ToolUseBlock) -> None:
        started = time.perf_counter()
        outcome = await ctx.hub.dispatch(use.name, use.input)
        outcomes[use.id] = outcome
        await ctx.log.append(finished_event(ctx, use, outcome, _ms_since(started)))

    if len(approved) == 1:
        await one(approved[0])  # the common case needs no task group
    else:
        async with anyio.create_task_group() as tg:
            for use in approved:
                tg.start_soon(one, use)
    return [
        ToolResultBlock(tool_use_id=u.id, content=outcomes[u.id].content, is_error=outcomes[u.id].is_error)
        for u in uses
    ]


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
    )


def _ms_since(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 3)
