"""Rebuild a session's conversation from its stored events.

This is how a session survives a restart: the store holds every user message, assistant message and
tool result, and the model-facing history is derived from them. A tool call that never got a result
(the process died mid-call) gets an error result saying so, because model APIs reject a tool call
without its result, and the model should know the call's effect is unknown.
"""

from __future__ import annotations

from collections.abc import Iterable

from orchestrator.events import AssistantMessage, Event, RunFinished, ToolCallFinished, UserMessage
from orchestrator.messages import Message, TextBlock, ToolResultBlock

INTERRUPTED_RESULT = "no result: Loom stopped before this call finished; its effect is unknown"


def rebuild_history(events: Iterable[Event]) -> list[Message]:
    """The conversation as the loop would have built it, from a session's events in ``seq`` order."""
    history: list[Message] = []
    pending: list[str] = []  # tool-use ids of the last assistant message, in order
    results: dict[str, ToolResultBlock] = {}

    def close_turn() -> None:
        if pending:
            blocks = [
                results.get(i) or ToolResultBlock(tool_use_id=i, content=INTERRUPTED_RESULT, is_error=True)
                for i in pending
            ]
            history.append(Message(role="user", content=list(blocks)))
            pending.clear()
            results.clear()

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
        elif isinstance(event, RunFinished):
            close_turn()
    close_turn()
    return history
