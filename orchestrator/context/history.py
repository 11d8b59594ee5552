"""Rebuild a session's conversation from its stored events.

This is how a session survives a restart: the store holds every user message, assistant message and
tool result, and the model-facing history is derived from them. A session that stays open does not rebuild
for each run: it keeps the history in memory and appends to it as this rebuild would (:func:`user_turn`),
so the two give the same messages (tests/orchestrator/runtime/test_session_memory.py).

A tool call that never got a result (the process died mid-call) gets an error result saying so, because
model APIs reject a tool call without its result, and the model should know the call's effect is unknown.

A resumed run (``run_resumed``) continues the turn its interruption left open: the results recorded
after the resume join those recorded before it, and the resume's note to the model follows them, so
the rebuilt history is what the resumed run's model saw. The advisor's warnings about a batch
(``advisor_reviewed`` with the verdict ``warn``) follow its results, before any resume note, as the loop placed them;
so does a loop's notice (``loop_detected`` with a ``note``), after the advisor's warnings.

A session started from another's handoff opens with a copy of it (``handoff_written`` with ``from_session_id``):
its history begins with the handoff as a user turn, before its first message.

A compaction (``context_compacted``) replaces older history in the model's context by a summary while
the raw events stay in the store: the history is then the summary, as a user turn, followed by the
history rebuilt from the events the compaction kept. Only the latest compaction matters (each one
summarises the one before it), so the rebuild finds it from the end and never reads the dropped part.
The model's plan, as the compaction carried it, follows the summary in its turn, verbatim
(:mod:`orchestrator.context.plan`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from orchestrator.context.plan import PlanItems, carried_plan, plan_section
from orchestrator.context.truncation import clip_result
from orchestrator.events import (
    AdvisorReviewed,
    AssistantMessage,
    ContextCompacted,
    Event,
    RunFinished,
    RunResumed,
    ToolCallFinished,
    UserMessage,
)
from orchestrator.events_long import HandoffWritten, HookRan, LoopDetected
from orchestrator.loop.advisor import advice_note
from orchestrator.messages import Message, TextBlock, ToolResultBlock

INTERRUPTED_RESULT = "no result: Loom stopped before this call finished; its effect is unknown"

_RESUMABLE = ("interrupted", "needs_review")


@dataclass(frozen=True, slots=True)
class RebuiltContext:
    """The model-facing history of a session, with what compaction needs to know about it."""

    compaction: ContextCompacted | None
    """The latest compaction, whose summary opens ``messages``; ``None`` if the session never compacted."""
    tail: Sequence[Event]
    """The events the history is rebuilt from (those from the compaction's ``kept_from_seq`` on, or all)."""
    messages: list[Message]
    """The history: the summary turn (if any), then the messages rebuilt from ``tail``."""
    assistant_seqs: dict[int, int] = field(default_factory=dict)
    """Index in ``messages`` of each assistant message taken from an ``assistant_message`` event -> its seq."""
    summary_turns: int = 0
    """How many leading messages hold nothing but the summary: 1 when it is a turn of its own, else 0 (no
    compaction, or the kept part began with a user turn that was merged into the summary's)."""


def summary_text(event: ContextCompacted) -> str:
    """The summary of ``event`` as the model reads it: framed so it knows what it is and where the rest went."""
    return (
        f"[Loom compacted the earlier conversation (events {event.dropped_from_seq}–{event.dropped_to_seq}) into this"
        " summary; the raw history is kept in the store.]\n\n" + event.summary
    )


def summary_message(event: ContextCompacted, plan: PlanItems = ()) -> Message:
    """The user turn that stands for everything ``event`` replaced, with the plan it carried (if any) after it."""
    return Message(role="user", content=[TextBlock(text=summary_text(event) + plan_section(plan))])


def handoff_text(event: HandoffWritten) -> str:
    """The handoff a fresh session starts from, as its model reads it: framed, with the instructions verbatim."""
    parts = [
        f"[Loom started this session from the handoff of session {event.from_session_id}, which ended there; its"
        " history is kept in the store. Carry on the work from this handoff.]",
        event.text,
    ]
    if event.instructions:
        quoted = "\n".join(f"<instruction>\n{text}\n</instruction>" for text in event.instructions)
        parts.append(f"The user's instructions so far, verbatim:\n{quoted}")
    if event.extra.strip():
        parts.append(f"For this session, the user adds:\n{event.extra}")
    return "\n\n".join(parts)


def user_turn(text: str) -> Message:
    """The history's message for a ``user_message`` event: an open session appends it as a rebuild would."""
    return Message(role="user", content=[TextBlock(text=text)])


def rebuild_history(events: Iterable[Event], *, open_tail: bool = False) -> list[Message]:
    """The conversation as the loop would have built it, from a session's events in ``seq`` order.

    With ``open_tail`` the tool calls of the last assistant message are left without results (the
    caller, resuming a run, supplies them), and a pending resume note is dropped. After a compaction
    the history starts with its summary (see :func:`rebuild_context`).
    """
    return rebuild_context(events, open_tail=open_tail).messages


def rebuild_context(events: Iterable[Event], *, open_tail: bool = False) -> RebuiltContext:
    """Like :func:`rebuild_history`, also saying which compaction applies and where each assistant message came from.

    The history is ``[summary] + rebuild(events with seq >= kept_from_seq)`` for the latest compaction. A
    compaction keeps from an assistant message, so roles alternate after the summary's user turn; should
    the kept part start with a user turn anyway, that turn is merged into the summary's.
    """
    seq_events = events if isinstance(events, Sequence) else list(events)
    latest = _latest_compaction(seq_events)
    if latest is None:
        messages, assistant_seqs = _rebuild(seq_events, open_tail=open_tail)
        return RebuiltContext(None, seq_events, messages, assistant_seqs)
    index, compaction = latest
    kept_from = compaction.kept_from_seq
    start = index
    # Walk back to the first kept event: the kept part is short next to the dropped part, which stays unread.
    while start > 0 and _kept(seq_events[start - 1], kept_from):
        start -= 1
    tail = [e for e in seq_events[start:] if _kept(e, kept_from)]
    kept, kept_seqs = _rebuild(tail, open_tail=open_tail)
    summary = summary_message(compaction, carried_plan(seq_events, index))
    if kept and kept[0].role == "user":
        messages = [Message(role="user", content=[*summary.content, *kept[0].content]), *kept[1:]]
        return RebuiltContext(compaction, tail, messages, kept_seqs)
    messages = [summary, *kept]
    return RebuiltContext(compaction, tail, messages, {i + 1: seq for i, seq in kept_seqs.items()}, summary_turns=1)


def _latest_compaction(events: Sequence[Event]) -> tuple[int, ContextCompacted] | None:
    for i in range(len(events) - 1, -1, -1):
        event = events[i]
        if isinstance(event, ContextCompacted):
            return i, event
    return None


def _kept(event: Event, kept_from: int) -> bool:
    return event.seq is None or event.seq >= kept_from


def _rebuild(events: Iterable[Event], *, open_tail: bool) -> tuple[list[Message], dict[int, int]]:
    history: list[Message] = []
    assistant_seqs: dict[int, int] = {}
    pending: list[str] = []  # tool-use ids of the last assistant message, in order
    results: dict[str, ToolResultBlock] = {}
    note: list[str] = []  # the latest resume note not yet placed
    advice: list[TextBlock] = []  # the advisor's warnings about the open turn's calls

    def close_turn() -> None:
        extra = [*advice, *([TextBlock(text=note[-1])] if note and note[-1] else [])]
        note.clear()
        advice.clear()
        if pending:
            blocks: list[ToolResultBlock | TextBlock] = [
                results.get(i) or ToolResultBlock(tool_use_id=i, content=INTERRUPTED_RESULT, is_error=True)
                for i in pending
            ]
            history.append(Message(role="user", content=[*blocks, *extra]))
            pending.clear()
            results.clear()
        else:
            for block in extra:  # a resume's note, or what hooks told the model at a turn without tool calls
                append_note(history, block)

    for event in events:
        if isinstance(event, UserMessage):
            close_turn()
            history.append(user_turn(event.text))
        elif isinstance(event, HandoffWritten) and event.from_session_id:
            # The opening of a session started from a handoff: the first thing its model reads.
            close_turn()
            history.append(user_turn(handoff_text(event)))
        elif isinstance(event, AssistantMessage):
            close_turn()
            if event.seq is not None:
                assistant_seqs[len(history)] = event.seq
            history.append(event.message)
            pending.extend(b.id for b in event.message.tool_uses)
        elif isinstance(event, ToolCallFinished):
            # Cut as the loop cut it when the result came in: the rebuilt context is what the model saw.
            results[event.call_id] = ToolResultBlock(
                tool_use_id=event.call_id,
                content=clip_result(event.content, event.call_id),
                is_error=event.is_error,
                attachments=event.attachments,
            )
        elif isinstance(event, RunResumed):
            note.append(event.note)
        elif isinstance(event, AdvisorReviewed) and (warning := advice_note(event)) is not None:
            advice.append(warning)
        elif isinstance(event, LoopDetected) and event.note:
            advice.append(TextBlock(text=event.note))  # stored after the step's results, so after the warnings
        elif isinstance(event, HookRan) and event.context:
            advice.append(TextBlock(text=event.context))  # stored where the loop placed it: after results, prompt
        elif isinstance(event, RunFinished) and event.status not in _RESUMABLE:
            close_turn()  # an interrupted run's open turn stays open: a resume may continue it
    if not open_tail:
        close_turn()
    return history, assistant_seqs


def append_note(history: list[Message], note: TextBlock) -> None:
    """Add ``note`` to the user turn that ends ``history`` (or start one), so that roles still alternate."""
    if history and history[-1].role == "user":
        last = history[-1]
        history[-1] = Message(role="user", content=[*last.content, note])
    else:
        history.append(Message(role="user", content=[note]))
