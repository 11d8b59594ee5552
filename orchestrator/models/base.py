"""The one interface every model provider implements.

A provider turns a :class:`ModelRequest` into a stream of :class:`ModelEvent`: zero or more
:class:`TextDelta` and :class:`ToolCallDelta` for live display, then exactly one :class:`ModelResponse`
holding the whole assistant message (the deltas preview it; they are never a second truth). Errors
are raised as :class:`ModelError`; ``transient`` tells the retry layer whether trying again can help.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from orchestrator.messages import Message, Usage

StopReason = Literal["end_turn", "tool_use", "max_tokens", "stop_sequence", "refusal", "other"]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as offered to the model."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """Everything a provider needs for one call.

    ``messages`` is the live history; providers must not mutate it and should not copy it more than
    their wire format requires.
    """

    system: str
    messages: Sequence[Message]
    tools: Sequence[ToolSpec] = ()
    max_tokens: int = 4096
    purpose: Literal["turn", "summary"] = "turn"
    """``summary``: a compaction asks for a summary of the conversation, outside it (providers ignore this;
    the scripted model answers it from its ``summaries`` or writes one itself)."""


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of assistant text, for live display only (the full text is in the response)."""

    text: str


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """The complete assistant message of one model call."""

    message: Message
    stop_reason: StopReason
    usage: Usage = field(default_factory=Usage)


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A piece of one tool call's arguments as the model streams them, for live display only.

    The pieces of one call, joined in order, are its arguments' JSON text as the model wrote it; the
    parsed arguments are in the response's :class:`~orchestrator.messages.ToolUseBlock`.
    """

    index: int
    """The call's position among the response's tool calls (0 for the first), whatever the wire numbers."""
    arguments: str
    """The next piece of the JSON text (``""`` on a first piece that only names the call)."""
    call_id: str = ""
    name: str = ""
    """The call's id and tool, on its first piece (the id stays ``""`` where the provider sends none)."""


ModelEvent = TextDelta | ToolCallDelta | ModelResponse


class ModelError(Exception):
    """A model call failed.

    Attributes:
        transient: True when retrying may succeed (rate limits, overload, 5xx, dropped connections).
        status: the HTTP status, when there was one.
    """

    def __init__(self, message: str, *, transient: bool, status: int | None = None) -> None:
        super().__init__(message)
        self.transient = transient
        self.status = status


class Model(Protocol):
    """A model provider."""

    @property
    def name(self) -> str:
        """``provider:model`` as the user selected it."""
        ...

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream one model call: text and tool-argument deltas, then exactly one :class:`ModelResponse`.

        Raises:
            ModelError: the call failed; nothing after the error is valid.
        """
        ...


def parse_tool_input(provider: str, name: str, call_id: str, raw: str, *, what: str = "input") -> dict[str, Any]:
    """Decode the streamed JSON of one tool call's arguments (empty or ``null`` means no arguments).

    Raises:
        ModelError: the JSON is invalid or not an object (permanent: asking again gives the same output).
    """
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ModelError(
            f"{provider}: tool call {name!r} ({call_id}) has invalid JSON {what}: {exc}: {raw[:200]!r}",
            transient=False,
        ) from exc
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ModelError(
            f"{provider}: tool call {name!r} ({call_id}) {what} is not a JSON object: {raw[:200]!r}", transient=False
        )
    return value
