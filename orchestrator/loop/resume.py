"""Resuming an interrupted run without repeating its side effects.

A run left ``interrupted`` (Loom crashed, was killed or shut down mid-run) or ``needs_review`` keeps
its id and continues from its journal, without a new user message. Only the tool calls of the run's
last assistant message can be in doubt, since every earlier step's results were recorded before the
next model call:

- a call that *finished* has its recorded result fed back; it is never run again;
- a call that *started but never finished* may have taken effect. It is run again only if its
  tool's MCP annotations say it is read-only or idempotent; otherwise a reviewer decides through the
  approval machinery (an ``approval_requested`` of kind ``review``): approve runs it again, deny
  skips it (the reason goes to the model), cancelling the run stops. A headless resume cannot ask:
  the run ends ``needs_review`` with nothing run again;
- a call that *never started* (it was waiting for approval) goes through policy again.

The advisor is not asked again about the interrupted batch: its review was stored with the assistant message,
so a rejection's refusals are among the finished calls, and the warnings of its stored review are placed
after the results again. Loop detection goes on counting from the run's steps before the interruption
(:mod:`orchestrator.loop.repeats`), and a loop's notice about the interrupted step is placed again, after them.

The model is told in a short note, after the tool results, that an interruption happened and what
became of each call; the note is recorded on the ``run_resumed`` event so that a rebuilt history
shows it too. The loop then continues with the same step numbering.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import anyio

from orchestrator.context.history import append_note, rebuild_history
from orchestrator.events import (
    AdvisorReviewed,
    AssistantMessage,
    ContextCompacted,
    Event,
    RunFinished,
    RunResumed,
    RunStarted,
    ToolCallFinished,
    ToolCallStarted,
    event_run_id,
)
from orchestrator.events_long import HookRan, LoopDetected
from orchestrator.hub.outcomes import ToolOutcome
from orchestrator.hub.retry import may_retry
from orchestrator.loop.advisor import advice_note
from orchestrator.loop.loop import LoopResult, RunContext, ask_calls, check_calls, run_loop, run_tools
from orchestrator.loop.steps import finished_event, started_event
from orchestrator.messages import Message, TextBlock, ToolUseBlock
from orchestrator.runtime.owner import this_process

RESUMABLE = ("interrupted", "needs_review")
"""Run statuses a resume accepts."""

REVIEW_REASON = (
    "may have run already: Loom was interrupted while this call was in progress, and the tool is not marked "
    "read-only or idempotent. Approve to run it again, deny to skip it (your reason is shown to the model), "
    "or cancel the run to stop"
)


class ResumeError(Exception):
    """A run cannot be resumed (unknown, not interrupted, not the session's latest); the message says why."""


@dataclass(frozen=True, slots=True)
class ResumePoint:
    """Where an interrupted run stands, read from its session's events."""

    run_id: str
    after_step: int
    """The step of the run's last assistant message (0 if the model had not answered yet)."""
    max_steps: int
    history: list[Message]
    """The conversation up to and including the last assistant message, its tool calls without results."""
    uses: list[ToolUseBlock] = field(default_factory=list[ToolUseBlock])
    """The tool calls of the last assistant message, in order."""
    finished: dict[str, ToolCallFinished] = field(default_factory=dict[str, ToolCallFinished])
    started: frozenset[str] = frozenset()
    answered: str | None = None
    """The final text, when the last assistant message asked for no tools (the run had in fact ended)."""
    resumed_by: str = ""
    """The owner of a resume that never finished (it was interrupted too), if any."""
    advice: AdvisorReviewed | None = None
    """The advisor's review of the last assistant message's calls, if it had one: it is reused, never asked again."""
    loop_note: str = ""
    """What a loop's notice told the model after the last step's results, if it had one: it is placed again."""
    arguments: dict[str, dict[str, Any]] = field(default_factory=dict[str, dict[str, Any]])
    """The arguments each started call was journalled with (a PreToolUse hook may have rewritten the model's)."""
    sent_on: tuple[str, ...] = ()
    """What Stop hooks told the model after its last answer: they sent the run on, so it had not ended there."""

    def as_started(self) -> list[ToolUseBlock]:
        """``uses`` with the arguments they started with: what ran is what runs again."""
        return [
            u.model_copy(update={"input": self.arguments[u.id]}) if u.id in self.arguments else u for u in self.uses
        ]

    def unfinished(self) -> list[ToolUseBlock]:
        """Calls that started but have no result: they may or may not have taken effect."""
        return [u for u in self.uses if u.id in self.started and u.id not in self.finished]

    def unstarted(self) -> list[ToolUseBlock]:
        """Calls that never started (waiting for approval when Loom stopped)."""
        return [u for u in self.uses if u.id not in self.started and u.id not in self.finished]


def find_resume_point(events: Sequence[Event], run_id: str) -> ResumePoint:
    """Read where ``run_id`` stopped from its session's events (in ``seq`` order).

    Raises:
        ResumeError: the run is not in these events, or it is not the session's latest run.
    """
    starts = [i for i, e in enumerate(events) if isinstance(e, RunStarted)]
    mine = [i for i in starts if event_run_id(events[i]) == run_id]
    if not mine:
        raise ResumeError(f"run {run_id!r} is not in its session's events")
    if starts[-1] != mine[-1]:
        raise ResumeError(f"run {run_id!r} is not its session's latest run: a later run continued the conversation")
    start = events[mine[-1]]
    assert isinstance(start, RunStarted)
    run_events = [(i, e) for i, e in enumerate(events) if i > mine[-1] and event_run_id(e) == run_id]
    last = next(((i, e) for i, e in reversed(run_events) if isinstance(e, AssistantMessage)), None)
    resumed_by = ""
    for _, event in reversed(run_events):
        if isinstance(event, RunFinished):
            break
        if isinstance(event, RunResumed):
            resumed_by = event.owner
            break
    if last is None:
        return ResumePoint(run_id, 0, start.max_steps, rebuild_history(events, open_tail=True), resumed_by=resumed_by)
    index, message = last
    assert isinstance(message, AssistantMessage)
    after = [e for i, e in run_events if i > index]
    uses = message.message.tool_uses
    # A compaction recorded after the step (before the next model call that never came, or asked for while the
    # run was interrupted) still applies: it kept from this message or earlier, so the resumed run sees the
    # summary, not the history it replaced.
    later = [
        e for e in events[index + 1 :] if isinstance(e, ContextCompacted) and e.kept_from_seq <= (message.seq or 0)
    ]
    sent_on = tuple(e.context for e in after if isinstance(e, HookRan) and e.context) if not uses else ()
    return ResumePoint(
        run_id,
        message.step,
        start.max_steps,
        rebuild_history([*events[: index + 1], *later[-1:]], open_tail=True),
        uses,
        {e.call_id: e for e in after if isinstance(e, ToolCallFinished)},
        frozenset(e.call_id for e in after if isinstance(e, ToolCallStarted)),
        message.message.text if not uses and not sent_on else None,
        resumed_by,
        next((e for e in after if isinstance(e, AdvisorReviewed)), None),
        loop_note=next((e.note for e in after if isinstance(e, LoopDetected) and e.note), ""),
        arguments={e.call_id: e.arguments for e in after if isinstance(e, ToolCallStarted)},
        sent_on=sent_on,
    )


async def resume_loop(ctx: RunContext, point: ResumePoint, *, headless: bool) -> LoopResult:
    """Finish the interrupted step of ``point`` and continue the run's loop until it ends.

    ``ctx.history`` is replaced (in place) by the history up to the interruption. ``headless``: nobody
    can answer a review, so a call that needs one ends the run ``needs_review`` with nothing run again.

    Raises:
        orchestrator.models.base.ModelError: a model call failed for good.
        orchestrator.store.interface.StoreError: the event log could not be written.
    """
    ctx.history[:] = point.history
    ctx.step = point.after_step
    point = replace(point, uses=point.as_started())
    unfinished = point.unfinished()
    rerun = [u for u in unfinished if harmless(ctx, u)]
    review = [u for u in unfinished if u not in rerun]
    unstarted = point.unstarted()
    reused = [u for u in point.uses if u.id in point.finished]
    note = interruption_note(point.after_step, reused, rerun, review, unstarted)
    stops = point.answered is not None or (bool(review) and headless)  # the model will not be called
    resumed = RunResumed(
        session_id=ctx.session_id,
        run_id=ctx.run_id,
        after_step=point.after_step,
        owner=this_process(),
        reused=[u.id for u in reused],
        rerun=[u.id for u in rerun],
        review=[u.id for u in review],
        unstarted=[u.id for u in unstarted],
        note="" if stops else note,
    )
    await ctx.log.append(resumed)
    if point.answered is not None:  # the model had answered; only the run's end was not recorded
        return LoopResult("completed", "end_turn", point.answered, point.after_step)
    if review and headless:
        return LoopResult("needs_review", needs_review_reason(review), "", point.after_step)
    if not point.uses:
        for text in point.sent_on:  # a Stop hook's reason to go on comes first, as a rebuilt history places it
            append_note(ctx.history, TextBlock(text=text))
        append_note(ctx.history, TextBlock(text=note))
        return await run_loop(ctx)

    approved, refused, to_ask = await check_calls(ctx, unstarted)
    checked = {u.id: u for u in unstarted}  # a PreToolUse hook may have rewritten them (in place)
    point = replace(point, uses=[checked.get(u.id, u) for u in point.uses])
    allowed: list[ToolUseBlock] = []
    denied: list[tuple[ToolUseBlock, ToolOutcome]] = []

    async def ask(kind: str) -> None:
        if kind == "review":
            ok, passed_over = await ask_calls(ctx, [(u, REVIEW_REASON) for u in review], "review")
            denied.extend((u, ToolOutcome(skipped(o.content), True, "denied")) for u, o in passed_over)
        else:
            ok, refusals = await ask_calls(ctx, to_ask)
            denied.extend(refusals)
        allowed.extend(ok)

    if refused:
        await ctx.log.append(*(finished_event(ctx, u, o, 0.0) for u, o in refused))
    if not ctx.steps.concurrent:  # see Steps.concurrent
        for kind in ("review",) * bool(review) + ("policy",) * bool(to_ask):
            await ask(kind)
    else:
        async with anyio.create_task_group() as tg:
            if review:
                tg.start_soon(ask, "review")
            if to_ask:
                tg.start_soon(ask, "policy")
    to_run = [u for u in point.uses if u in rerun or u in approved or u in allowed]
    if to_run or denied:
        await ctx.log.append(
            *(started_event(ctx, u) for u in to_run), *(finished_event(ctx, u, o, 0.0) for u, o in denied)
        )
    stored = [(u, _outcome(point.finished[u.id])) for u in reused]
    results = await run_tools(ctx, point.uses, to_run, [*stored, *refused, *denied])
    # The advisor's warnings, from its stored review, sit where the loop put them: after the results, before the note.
    advice = advice_note(point.advice) if point.advice is not None else None
    looped = [TextBlock(text=point.loop_note)] if point.loop_note else []  # a loop's notice came after the warnings
    hooked = await ctx.hooks.post_tools(ctx, to_run, [*results]) if ctx.hooks is not None else []
    ctx.history.append(
        Message(role="user", content=[*results, *([advice] if advice else []), *looped, *hooked, TextBlock(text=note)])
    )
    return await run_loop(ctx)


def interruption_note(
    after_step: int,
    reused: Sequence[ToolUseBlock],
    rerun: Sequence[ToolUseBlock],
    review: Sequence[ToolUseBlock],
    unstarted: Sequence[ToolUseBlock],
) -> str:
    """What the model is told about the interruption."""
    where = f"after step {after_step}" if after_step else "before the model's first answer"
    parts = [
        f"[Loom] This run was interrupted {where} (Loom stopped: a crash, a kill or a shutdown) and has been "
        "resumed; there is no new message from the user."
    ]
    if reused:
        parts.append(f"Results recorded before the interruption were reused, not run again: {_names(reused)}.")
    if rerun:
        parts.append(f"In progress when Loom stopped and run again (read-only or idempotent): {_names(rerun)}.")
    if review:
        parts.append(
            f"In progress when Loom stopped, so they may already have taken effect: {_names(review)}; "
            "a reviewer decided whether to run them again (their results say which)."
        )
    if unstarted:
        parts.append(f"Not started before the interruption, checked against policy again: {_names(unstarted)}.")
    if not (reused or rerun or review or unstarted):
        parts.append("Continue from where the conversation stands.")
    return " ".join(parts)


def needs_review_reason(review: Sequence[ToolUseBlock]) -> str:
    """Why a headless resume stopped: the calls that need a reviewer's decision."""
    return (
        f"needs review: {_names(review)} {'was' if len(review) == 1 else 'were'} in progress when Loom stopped "
        "and may already have taken effect; nothing was run again. Resume it where someone can answer "
        "(start `loom serve`, then `loom resume RUN`, and approve to run again or deny to skip)"
    )


def harmless(ctx: RunContext, use: ToolUseBlock) -> bool:
    """Whether a call that may have run already may simply run again (its tool is read-only or idempotent)."""
    tool = ctx.hub.tool(use.name)
    return tool is not None and may_retry(tool.annotations)


def skipped(denial: str) -> str:
    """What the model is told of a call in doubt that its reviewer chose not to run again."""
    return (
        "not run again: this call was in progress when Loom was interrupted and may already have taken effect; "
        f"the reviewer chose to skip it ({denial})"
    )


def _outcome(finished: ToolCallFinished) -> ToolOutcome:
    return ToolOutcome(
        finished.content,
        finished.is_error,
        finished.failure,
        finished.structured,
        attachments=tuple(finished.attachments),
    )


def _names(uses: Sequence[ToolUseBlock]) -> str:
    return ", ".join(f"{u.name} ({u.id})" for u in uses)
