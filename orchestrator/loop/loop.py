"""The agent loop: stream the model, run the tools it asks for, feed the results back, repeat.

It causes effects only through ``ctx.steps`` (:mod:`orchestrator.loop.steps`: a model call or a tool call
is one journalled step) and records its decisions in the :class:`~orchestrator.store.eventlog.EventLog`.
The history is one list that grows by appending; nothing copies it per step, so a step costs the
same at step 200 as at step 2. Every effect is recorded before the next model call: the assistant
message and the calls it starts in one store batch, each result as it arrives; the final answer, which
starts nothing, in one batch with the run's end (``RunContext.unstored``).

:mod:`orchestrator.loop.resume` reuses the call-handling steps (:func:`check_calls`, :func:`ask_calls`,
:func:`run_tools`) to finish an interrupted step, then hands the run back to :func:`run_loop`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio
import anyio.lowlevel

from orchestrator.context.truncation import clip_result
from orchestrator.events import ApprovalKind, AssistantMessage, Event, RunStatus
from orchestrator.hub.pool import Hub, ToolOutcome
from orchestrator.loop.advisor import advice_note, rejection
from orchestrator.loop.approvals import Approvals
from orchestrator.loop.repeats import watch_for
from orchestrator.loop.steps import EmbeddedSteps, Steps, finished_event, started_event
from orchestrator.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from orchestrator.models.base import Model, ModelRequest, ModelResponse, ToolSpec
from orchestrator.store.eventlog import EventLog

if TYPE_CHECKING:
    from orchestrator.config import LoopSettings
    from orchestrator.context.compactor import Compactor
    from orchestrator.hooks import SessionHooks
    from orchestrator.loop.advisor import Advisor


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
    steps: Steps = field(default_factory=EmbeddedSteps)
    """Where model and tool calls happen and are journalled (the seam a durable engine replaces)."""
    compactor: Compactor | None = None
    """Counts the context after each model call (a ``context_watermark`` event, from its meter) and compacts the
    history before a model call that would pass the threshold; None does neither."""
    advisor: Advisor | None = None
    """Reviews each batch of tool calls before policy decides it (:mod:`orchestrator.loop.advisor`); None: no review."""
    loop: LoopSettings | None = None
    """When a run repeating itself is told, and stopped (:mod:`orchestrator.loop.repeats`); None: never."""
    unstored: list[Event] = field(default_factory=list[Event])
    """Events of the run's last step that the loop left for the run's end to store, in the batch with its
    ``run_finished``: a final answer starts no call, so nothing has to be on record before the run ends."""
    hooks: SessionHooks | None = None
    """The session's hooks (:mod:`orchestrator.hooks`); None (no hooks configured) costs a check per call site."""


@dataclass(frozen=True, slots=True)
class LoopResult:
    """How the loop ended."""

    status: RunStatus
    reason: str
    final_text: str
    steps: int


async def run_loop(ctx: RunContext) -> LoopResult:
    """Run until the model stops asking for tools, ``max_steps`` model calls have been made, or it loops.

    Raises:
        orchestrator.models.base.ModelError: a model call failed for good (after any retries).
        orchestrator.store.interface.StoreError: the event log could not be written.
    """
    final_text = ""
    watch = watch_for(ctx)  # counts from the run's steps already in the history: a resume goes on counting
    while ctx.step < ctx.max_steps:
        # Event-log writes are shielded, so a cancel that lands during one is honoured here.
        await anyio.lowlevel.checkpoint_if_cancelled()
        ctx.step += 1
        tools: list[ToolSpec] = ctx.hub.tool_specs  # each step: a server's list change reaches the next request
        if ctx.compactor is not None:
            await ctx.compactor.before_model_call(
                ctx.history, system=ctx.system, tools=tools, run_id=ctx.run_id, call_model=_summarizer(ctx)
            )
        response, model_ms = await ctx.steps.model(ctx, tools)
        message = response.message
        ctx.history.append(message)
        final_text = message.text or final_text
        uses = message.tool_uses
        advice = None if ctx.advisor is None or not uses else await ctx.advisor.review(ctx, uses)
        if advice is not None and advice.verdict == "reject":  # nothing runs, and policy is not asked
            approved, to_ask = list[ToolUseBlock](), list[tuple[ToolUseBlock, str]]()
            refused = [(u, ToolOutcome(rejection(advice), True, "denied")) for u in uses]
        else:
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
        recorded: list[Event] = [assistant]
        if ctx.compactor is not None:
            recorded.append(
                ctx.compactor.meter.observe(
                    response.usage,
                    ctx.system,
                    ctx.history,
                    tools,
                    session_id=ctx.session_id,
                    run_id=ctx.run_id,
                    step=ctx.step,
                )
            )
        if advice is not None:
            recorded.append(advice)  # journalled with the batch it reviewed: a resume never asks about it again
        if not uses:
            # The final answer: stored with the run's end, one batch (a crash before it loses only this model
            # call, which a resume makes again, as it would have before the answer was stored).
            ctx.unstored.extend(recorded)
            if ctx.hooks is not None and (stopped := await ctx.hooks.at_stop(ctx, final_text)) is not None:
                if stopped.status == "running":
                    continue  # a Stop hook sent the run on: its reason is the history's new turn
                return stopped
            return LoopResult("completed", response.stop_reason, final_text, ctx.step)
        if not to_ask:  # the hot path: one store batch per step
            await ctx.log.append(*recorded, *(started_event(ctx, use) for use in approved), *refusals)
        else:
            await ctx.log.append(*recorded, *refusals)
            allowed, denied = await ask_calls(ctx, to_ask)
            approved = [u for u in uses if u in approved or u in allowed]
            refused.extend(denied)
            await ctx.log.append(
                *(started_event(ctx, use) for use in approved), *(finished_event(ctx, u, o, 0.0) for u, o in denied)
            )
        results: list[ToolResultBlock | TextBlock] = [*await run_tools(ctx, uses, approved, refused)]
        if advice is not None and (note := advice_note(advice)) is not None:
            results.append(note)  # the warnings follow the results, as a rebuilt history places them
        if ctx.hooks is not None:
            results.extend(await ctx.hooks.post_tools(ctx, approved, results))
        looped = None if watch is None else await watch.after_step(ctx, uses, results)
        ctx.history.append(Message(role="user", content=results))
        if looped is not None:
            return LoopResult("failed", looped, final_text, ctx.step)
    return LoopResult("failed", f"max_steps: stopped after {ctx.max_steps} model calls", final_text, ctx.step)


async def check_calls(
    ctx: RunContext, uses: list[ToolUseBlock]
) -> tuple[list[ToolUseBlock], list[tuple[ToolUseBlock, ToolOutcome]], list[tuple[ToolUseBlock, str]]]:
    """Sort the calls: may run, refused up front (unknown tool, bad arguments, policy), or to ask about.

    PreToolUse hooks are asked first; a call they rewrite replaces the model's in ``uses`` (in place), so that what
    is validated, decided, journalled and run is the rewritten call.
    """
    approved: list[ToolUseBlock] = []
    refused: list[tuple[ToolUseBlock, ToolOutcome]] = []
    to_ask: list[tuple[ToolUseBlock, str]] = []
    for i, use in enumerate(uses):
        hooked = None
        if ctx.hooks is not None and (known := ctx.hub.tool(use.name)) is not None:
            use, hooked = await ctx.hooks.pre_tool(ctx, use, known)
            uses[i] = use
        problem = await ctx.hub.check(use.name, use.input)
        tool = ctx.hub.tool(use.name)
        if problem is not None or tool is None:
            refused.append((use, problem or ToolOutcome(f"unknown tool {use.name!r}", True, "unknown_tool")))
            continue
        verdict, why = ctx.approvals.verdict(tool, use.input) if ctx.approvals is not None else ("allow", "")
        if hooked is not None:
            verdict, why = hooked.over(verdict, why, ctx.approvals is None or ctx.approvals.headless)
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
        hooked = await ctx.hooks.permission(ctx, use, reason) if ctx.hooks is not None and kind == "policy" else None
        ok, message = hooked or await approvals.ask(ctx.run_id, use.id, use.name, use.input, reason, kind)
        if ok:
            allowed.append(use)
        else:
            denied.append((use, ToolOutcome(message, True, "denied")))

    if not ctx.steps.concurrent:  # asked one after the other, so that a replay asks in the same order
        for use, reason in to_ask:
            await one(use, reason)
        return allowed, denied
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
        outcomes[use.id] = await ctx.steps.tool(ctx, use)

    if len(approved) == 1:
        await one(approved[0])  # the common case needs no task group
    elif not ctx.steps.concurrent:
        for use in approved:
            await one(use)
    else:
        async with anyio.create_task_group() as tg:
            for use in approved:
                tg.start_soon(one, use)
    # The store keeps each output whole; the model gets it cut to size, with a way to fetch the rest.
    return [
        ToolResultBlock(
            tool_use_id=u.id,
            content=clip_result(outcomes[u.id].content, u.id),
            is_error=outcomes[u.id].is_error,
            attachments=list(outcomes[u.id].attachments),
        )
        for u in uses
    ]


def _summarizer(ctx: RunContext) -> Callable[[ModelRequest], Awaitable[ModelResponse]]:
    async def call(request: ModelRequest) -> ModelResponse:
        return await ctx.steps.complete(ctx, request)

    return call
