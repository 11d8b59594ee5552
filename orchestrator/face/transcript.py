"""A session's transcript as markdown a person (or another agent's model) reads: one page of its stored events.

The ``loom://sessions/{id}/transcript`` resource: the newest :data:`PAGE_EVENTS` events by default, older pages by
``?before_seq=N``. Each page opens with a line saying which events it holds and the URI of the page before it, so
a reader always knows how to read more. A tool result or message is cut at :data:`MAX_PART_CHARS`, and a page at
:data:`MAX_PAGE_CHARS` (the rest of it is the next older page's business: the cut is said, with where to go on).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Final
from urllib.parse import quote

from orchestrator.events import (
    ApprovalDecided,
    ApprovalRequested,
    AssistantMessage,
    Event,
    ModeChanged,
    Notice,
    RunFinished,
    RunStarted,
    ToolCallFinished,
    UserMessage,
)
from orchestrator.messages import TextBlock, ToolUseBlock

__all__ = ["MAX_PAGE_CHARS", "MAX_PART_CHARS", "PAGE_EVENTS", "render_page", "transcript_uri"]

PAGE_EVENTS: Final = 200
"""Events on one transcript page."""
MAX_PART_CHARS: Final = 4_000
"""The most of one message or tool result a page shows."""
MAX_PAGE_CHARS: Final = 200_000
"""The most text one page holds (older events of the page are then left to the page before it)."""


def transcript_uri(session_id: str, before_seq: int | None = None) -> str:
    """The transcript resource of a session, or its page of events older than ``before_seq``."""
    base = f"loom://sessions/{quote(session_id, safe='')}/transcript"
    return base if before_seq is None else f"{base}?before_seq={before_seq}"


def _cut(text: str) -> str:
    text = text.strip()
    if len(text) <= MAX_PART_CHARS:
        return text
    return f"{text[:MAX_PART_CHARS]}\n[... {len(text) - MAX_PART_CHARS:,} more characters; read_events has it all]"


def _quote(text: str) -> str:
    return "\n".join(f"> {line}" if line else ">" for line in _cut(text).splitlines()) or ">"


def render_event(event: Event) -> str | None:
    """One event as a markdown section, or None for events a transcript leaves out (deltas, watermarks, ...)."""
    seq = event.seq
    if isinstance(event, UserMessage):
        return f"### [{seq}] user\n\n{_quote(event.text)}"
    if isinstance(event, AssistantMessage):
        parts = [f"### [{seq}] assistant (step {event.step})"]
        for block in event.message.content:
            if isinstance(block, TextBlock) and block.text.strip():
                parts.append(_cut(block.text))
            elif isinstance(block, ToolUseBlock):
                arguments = json.dumps(block.input, ensure_ascii=False)
                parts.append(f"- calls `{block.name}` {_cut(arguments)}")
        return "\n\n".join(parts)
    if isinstance(event, ToolCallFinished):
        status = f" (error: {event.failure or 'failed'})" if event.is_error else ""
        return f"### [{seq}] result of `{event.tool}`{status}\n\n```\n{_cut(event.content)}\n```"
    if isinstance(event, ApprovalRequested):
        return f"### [{seq}] approval asked for `{event.tool}`: {event.reason}"
    if isinstance(event, ApprovalDecided):
        return f"### [{seq}] approval {event.decision} by {event.decided_by or 'someone'}"
    if isinstance(event, RunStarted):
        return f"### [{seq}] run {event.run_id} started"
    if isinstance(event, RunFinished):
        why = f": {event.reason}" if event.reason else ""
        return f"### [{seq}] run {event.run_id} {event.status}{why}"
    if isinstance(event, Notice):
        return f"### [{seq}] {event.level}: {_cut(event.text)}"
    if isinstance(event, ModeChanged):
        return f"### [{seq}] mode {event.previous} -> {event.mode}"
    return None


def render_page(session_id: str, events: Sequence[Event], *, more_before: bool) -> str:
    """The page of ``events`` (oldest first) as markdown, headed by what it holds and how to read older ones."""
    sections: list[str] = []
    size = 0
    first_shown = None
    for event in reversed(events):  # newest first, so the cut drops the oldest
        text = render_event(event)
        if text is None:
            first_shown = event.seq
            continue
        if size + len(text) > MAX_PAGE_CHARS and sections:
            more_before = True
            break
        sections.append(text)
        size += len(text)
        first_shown = event.seq
    sections.reverse()
    if first_shown is None:
        head = f"# Session {session_id}: no events in this range"
    else:
        head = f"# Session {session_id}, events {first_shown} to {events[-1].seq}"
    if more_before and first_shown is not None:
        head += f"\n\nOlder events: read {transcript_uri(session_id, first_shown)}"
    else:
        head += "\n\nThis is the start of the session."
    return "\n\n".join([head, *sections]) + "\n"
