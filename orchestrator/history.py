"""Rebuild a session's conversation from its stored events.

This is how a session survives a restart: the store holds every user message, assistant message and
tool result, and the model-facing history is derived from them. A tool call that never got a result
(the process died mid-call) gets an error result saying so, because model APIs reject a tool call
without its result, and the model should know the call's effect is unknown.

A resumed run (``run_resumed``) continues the turn its interruption left open: the results recorded
after the resume join those recorded before it, and the resume's note to the model follows them, so
the rebuilt history is what the resumed run's model saw.
"""

from __future__ import annotations

from collections.abc import Iterable

from orchestrator.events import AssistantMessage, Event, RunFinished, RunResumed, ToolCallFinished, UserMessage
from orchestrator.messages import Message, TextBlock, ToolResultBlock

INTERRUPTED_RESULT = "no result: Loom stopped before this call finished; its effect is unknown"

_RESUMABLE = ("interrupted", "needs_review")


def rebuild_history(events: Iterable[Event], *, open_tail: bool = False) -> list[Message]:
    """The conversation as the loop would have built it, from a session's events in ``seq`` order.

    With ``open_tail`` the tool calls of the last assistant message are left without results (the
    caller, resuming a run, supplies them), and a pending resume note is dropped.
    """
    history: list[Message] = []
    pending: list[str] = []  # tool-use ids of the last assistant message, in order
    results: dict[str, ToolResultBlock] = {}
    note: list[str] = []  # the latest resume note not yet placed

    def close_turn() -> None:
        extra = [TextBlock(text=note[-1])] if note and note[-1] else []
        note.clear()
        if pending:
            blocks: list[ToolResultBlock | TextBlock] = [
                results.get(i) or ToolResultBlock(tool_use_id=i, content=INTERRUPTED_RESULT, is_error=True)
                for i in pending
            ]
            history.append(Message(role="user", content=[*blocks, *extra]))
            pending.clear()
            results.clear()
        elif extra:
            append_note(history, extra[0])

    for event in events:
        if isinstance(event, UserMessage):
            close_turn()
            history.append(Message(role="user", content=[TextBlock(text=event.text)]))
        elif isinstance(event, AssistantMessage):
            close_turn()
            history.append(event.message)
            pending.extend(b.id for b in event.message.tool_uses)
        elif isinstance(event, ToolCallFinished):
            results[event.call_id] = ToolResultBlock(
                tool_use_id=event.call_id, content=event.content, is_error=event.is_error
            )
        elif isinstance(event, RunResumed):
            note.append(event.note)
        elif isinstance(event, RunFinished) and event.status not in _RESUMABLE:
            close_turn()  # an interrupted run's open turn stays open: a resume may continue it
    if open_tail:
        return history
    close_turn()
    return history


def append_note(history: list[Message], note: TextBlock) -> None:
    """Add ``note`` to the user turn that ends ``history`` (or start one), so that roles still alternate."""
    if history and history[-1].role == "user":
        last = history[-1]
        history[-1] = Message(role="user", content=[*last.content, note])
    else:
        history.append(Message(role="user", content=[note]))
