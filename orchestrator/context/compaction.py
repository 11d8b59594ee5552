"""Compaction: replace older history, in the model's context, by a summary the model writes.

Long sessions outgrow the model's window. Rather than truncating (which silently forgets the user's
instructions and the work done) Loom asks the model for a summary in a fixed shape, checks it, and
records a ``context_compacted`` event; :func:`orchestrator.context.history.rebuild_history` then gives the
model the summary followed by the recent messages. The raw events stay in the store, so nothing is
lost for the user, for rewinds or for a later, better summary.

The steps are separate so that each caller takes only what it needs: :func:`plan_compaction` picks
what to replace, :func:`preview_compaction` says what a compaction would save without a model call,
and :func:`compact` writes and checks the summary. None of them touches the store: the caller appends
the returned event, which keeps the decision of when to compact (threshold, ``/compact``, model
switch) in the runtime.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from orchestrator.context.history import rebuild_context, summary_message, summary_text
from orchestrator.context.plan import latest_plan
from orchestrator.context.summary import SECTIONS, SUMMARY_BUDGET_TOKENS, check_summary, summary_request
from orchestrator.context.tokens import estimate_message, estimate_messages, estimate_text
from orchestrator.events import (
    CompactionFailed,
    CompactionTrigger,
    ContextCompacted,
    Event,
    UserMessage,
)
from orchestrator.events_long import HandoffWritten
from orchestrator.messages import Message
from orchestrator.models.base import ModelError, ModelRequest, ModelResponse

__all__ = [
    "SECTIONS",
    "SUMMARY_BUDGET_TOKENS",
    "CompactionPlan",
    "CompactionPreview",
    "check_summary",
    "compact",
    "plan_compaction",
    "preview_compaction",
    "summary_request",
    "summary_text",
]

MAX_ATTEMPTS = 2

MAX_INSTRUCTION_CHARS = 2_000
"""A user message longer than this is material (a pasted log, a file), not an instruction: the summary
describes it instead of quoting it, and it stays whole in the store. Quoting every such message verbatim
would make each summary longer than the last, until none could be shorter than what it replaces."""
"""A summary that fails its checks is asked for once more, with the problem stated; a third try rarely
does better and would keep a run waiting, so after that the history is kept as it is."""


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """What a compaction would replace by a summary, and what it would keep."""

    previous: ContextCompacted | None
    """The latest earlier compaction, whose summary is the first dropped message; ``None`` if there is none."""
    dropped: list[Message]
    """The messages the summary replaces, as the model sees them now (an earlier summary first)."""
    instructions: list[str]
    """The user's instructions to carry verbatim: the earlier compaction's, then every user message
    in the dropped span, in order, without duplicates."""
    kept_from_seq: int
    """The assistant message from which the history is kept as it is."""
    dropped_from_seq: int
    """First event the summary covers (the earlier compaction's first, if there is one)."""
    dropped_to_seq: int
    """Last event the summary covers (the one just before ``kept_from_seq``)."""
    dropped_messages: int
    dropped_tool_calls: int
    tokens_dropped: int
    """Estimated tokens of ``dropped``."""
    tokens_kept: int
    """Estimated tokens of the messages kept as they are."""


@dataclass(frozen=True, slots=True)
class CompactionPreview:
    """What compacting now would do, estimated without asking the model (for ``/compact --preview``, say)."""

    tokens_before: int
    """Estimated tokens of the context now (``overhead_tokens`` included)."""
    tokens_after: int
    """Estimated tokens after compacting, assuming a summary of ``min(SUMMARY_BUDGET_TOKENS, dropped / 2)``
    tokens plus the instructions it must quote."""
    tokens_kept: int
    """Estimated tokens of the messages kept as they are."""
    tokens_dropped: int
    """Estimated tokens of the messages the summary would replace."""
    dropped_messages: int
    dropped_tool_calls: int


def plan_compaction(events: Sequence[Event], *, keep_tokens: int) -> CompactionPlan | None:
    """Choose what to replace: everything before the earliest assistant message after which ``keep_tokens`` fit.

    The cut is always just before an ``assistant_message`` event of the current context (the latest
    summary and the messages after it): tool results follow their call, so no call is cut from its
    result. If even the last assistant message onwards exceeds ``keep_tokens``, the cut is there.

    Args:
        events: The session's stored events, in ``seq`` order.
        keep_tokens: How many (estimated) tokens of recent messages to keep as they are.

    Returns:
        The plan, or ``None`` when there is nothing to replace: the whole context fits in ``keep_tokens``,
        there is no assistant message to cut before, or nothing but an earlier summary before the cut.
    """
    context = rebuild_context(events)
    messages = context.messages
    if not context.assistant_seqs:
        return None
    sizes = [estimate_message(m) for m in messages]
    suffix = [0] * (len(messages) + 1)
    for i in range(len(messages) - 1, -1, -1):
        suffix[i] = suffix[i + 1] + sizes[i]
    if suffix[0] <= keep_tokens:
        return None  # it all fits: replacing the opening turn alone would only lose words
    cuts = sorted(context.assistant_seqs)
    cut = next((i for i in cuts if suffix[i] <= keep_tokens), cuts[-1])
    # Nothing before the cut, or only an earlier summary: a summary of that would gain nothing.
    if cut <= context.summary_turns:
        return None
    kept_from_seq = context.assistant_seqs[cut]
    dropped_events = [e for e in context.tail if e.seq is not None and e.seq < kept_from_seq]
    previous = context.compaction
    instructions = list(previous.instructions) if previous is not None else []
    for event in dropped_events:
        texts = [event.text] if isinstance(event, UserMessage) else []
        if isinstance(event, HandoffWritten) and event.from_session_id:
            texts = [*event.instructions, event.extra]  # what a handoff carried stays verbatim past the handoff turn
        for text in texts:
            if text.strip() and len(text) <= MAX_INSTRUCTION_CHARS and text not in instructions:
                instructions.append(text)
    dropped = messages[:cut]
    first_seq = next((e.seq for e in events if e.seq is not None), 0)
    return CompactionPlan(
        previous=previous,
        dropped=dropped,
        instructions=instructions,
        kept_from_seq=kept_from_seq,
        dropped_from_seq=previous.dropped_from_seq if previous is not None else first_seq,
        dropped_to_seq=max((e.seq for e in dropped_events if e.seq is not None), default=kept_from_seq - 1),
        dropped_messages=len(dropped),
        dropped_tool_calls=sum(len(m.tool_uses) for m in dropped),
        tokens_dropped=sum(sizes[:cut]),
        tokens_kept=suffix[cut],
    )


def preview_compaction(
    events: Sequence[Event], *, keep_tokens: int, overhead_tokens: int = 0
) -> CompactionPreview | None:
    """Estimate what compacting now would save, without calling any model.

    Args:
        events: The session's stored events, in ``seq`` order.
        keep_tokens: As for :func:`plan_compaction`.
        overhead_tokens: Tokens every request spends besides the messages (system prompt, tools).

    Returns:
        The estimate, or ``None`` when there is nothing to compact.
    """
    plan = plan_compaction(events, keep_tokens=keep_tokens)
    if plan is None:
        return None
    summary = min(SUMMARY_BUDGET_TOKENS, plan.tokens_dropped // 2) + sum(estimate_text(i) for i in plan.instructions)
    return CompactionPreview(
        tokens_before=overhead_tokens + plan.tokens_dropped + plan.tokens_kept,
        tokens_after=overhead_tokens + plan.tokens_kept + summary,
        tokens_kept=plan.tokens_kept,
        tokens_dropped=plan.tokens_dropped,
        dropped_messages=plan.dropped_messages,
        dropped_tool_calls=plan.dropped_tool_calls,
    )


async def compact(
    events: Sequence[Event],
    *,
    call_model: Callable[[ModelRequest], Awaitable[ModelResponse]],
    session_id: str,
    run_id: str | None,
    trigger: CompactionTrigger,
    focus: str = "",
    keep_tokens: int,
    overhead_tokens: int = 0,
    max_tokens: int = 4096,
) -> ContextCompacted | CompactionFailed | None:
    """Have the model summarise the older history, check the summary, and say what to record.

    The summary is asked for, checked with :func:`check_summary`, and asked for once more with the
    problem stated if it fails. Nothing is stored here: the caller appends the returned event (a
    ``context_compacted`` changes what :func:`~orchestrator.context.history.rebuild_history` gives; a
    ``compaction_failed`` leaves the history as it is). Cancellation propagates.

    Args:
        events: The session's stored events, in ``seq`` order.
        call_model: Makes one model call (with whatever retries of transient errors the caller wants).
        session_id: The session the events belong to.
        run_id: The run that needed the compaction, if any.
        trigger: Why compacting: ``auto``, ``manual`` or ``model_switch``.
        focus: What to keep in most detail; empty for no preference.
        keep_tokens: As for :func:`plan_compaction`.
        overhead_tokens: Tokens every request spends besides the messages (system prompt, tools).
        max_tokens: The most the model may write for the summary.

    Returns:
        ``None`` when there is nothing to compact, else the event to append.
    """
    plan = plan_compaction(events, keep_tokens=keep_tokens)
    if plan is None:
        return None
    tokens_before = overhead_tokens + plan.tokens_dropped + plan.tokens_kept

    def failed(why: str, attempts: int) -> CompactionFailed:
        return CompactionFailed(
            session_id=session_id,
            run_id=run_id,
            trigger=trigger,
            reason=f"{why}; the history was kept as it is",
            attempts=attempts,
            tokens=tokens_before,
        )

    problem = ""
    for attempt in range(1, MAX_ATTEMPTS + 1):
        try:
            response = await call_model(summary_request(plan, focus=focus, problem=problem, max_tokens=max_tokens))
        except ModelError as exc:
            return failed(f"the model call for the summary failed ({exc})", attempt)
        summary = response.message.text.strip()
        found = check_summary(summary, plan)
        if found is not None and response.stop_reason == "max_tokens":
            # The likely cause of missing sections: say it, or the retry is cut off the same way.
            found += f"; it was cut off at the output limit of {max_tokens} tokens, so write less"
        if found is None:
            event = ContextCompacted(
                session_id=session_id,
                run_id=run_id,
                trigger=trigger,
                focus=focus,
                summary=summary,
                instructions=plan.instructions,
                kept_from_seq=plan.kept_from_seq,
                dropped_from_seq=plan.dropped_from_seq,
                dropped_to_seq=plan.dropped_to_seq,
                dropped_messages=plan.dropped_messages,
                dropped_tool_calls=plan.dropped_tool_calls,
                tokens_before=tokens_before,
                tokens_after=0,  # set below: the summary turn's size depends on the event's own framing
                attempts=attempt,
            )
            # The summary's turn also holds the plan, which the caller records again with the compaction.
            turn = summary_message(event, latest_plan(events))
            tokens_after = overhead_tokens + estimate_messages([turn]) + plan.tokens_kept
            return event.model_copy(update={"tokens_after": tokens_after})
        problem = found
    return failed(f"the summary failed its checks {MAX_ATTEMPTS} times ({problem})", MAX_ATTEMPTS)
