"""Token estimates for what a provider has not counted yet.

Providers report exact usage only after a call; before it (is the next request past the threshold?
is a summary shorter than what it replaces?) Loom estimates. About four characters a token is what
Anthropic and OpenAI tokenizers give for English and code, and it errs on the high side for both,
which is the safe side for a context limit. A tokenizer per provider would be exact but would add a
dependency and a download per model for a decision that only needs to be roughly right.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from orchestrator.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock

if TYPE_CHECKING:
    from orchestrator.models.base import ToolSpec

CHARS_PER_TOKEN = 4
MESSAGE_OVERHEAD = 4
"""Tokens a provider spends on a message's framing (role, separators)."""
BLOCK_OVERHEAD = 3
"""Tokens for a content block's framing (a tool call's id and type, say)."""


def estimate_text(text: str) -> int:
    """Estimated tokens of ``text`` (rounded up, so a non-empty text is at least one token)."""
    return -(-len(text) // CHARS_PER_TOKEN)


def estimate_message(message: Message) -> int:
    """Estimated tokens of one message, framing included."""
    total = MESSAGE_OVERHEAD
    for block in message.content:
        total += BLOCK_OVERHEAD
        if isinstance(block, TextBlock):
            total += estimate_text(block.text)
        elif isinstance(block, ToolUseBlock):
            total += estimate_text(block.name) + estimate_text(json.dumps(block.input, ensure_ascii=False))
        elif isinstance(block, ToolResultBlock):
            total += estimate_text(block.content)
    return total


def estimate_messages(messages: Iterable[Message]) -> int:
    """Estimated tokens of a sequence of messages."""
    return sum(estimate_message(m) for m in messages)


def estimate_tools(tools: Sequence[ToolSpec]) -> int:
    """Estimated tokens of the tool definitions sent with every request."""
    return sum(
        BLOCK_OVERHEAD
        + estimate_text(t.name)
        + estimate_text(t.description)
        + estimate_text(json.dumps(t.input_schema, ensure_ascii=False))
        for t in tools
    )


def estimate_overhead(system: str, tools: Sequence[ToolSpec] = ()) -> int:
    """Estimated tokens every request spends before its first message: the system prompt and the tool definitions."""
    return estimate_text(system) + estimate_tools(tools)


def estimate_request(system: str, messages: Iterable[Message], tools: Sequence[ToolSpec] = ()) -> int:
    """Estimated input tokens of a whole request: system prompt, tools and messages."""
    return estimate_overhead(system, tools) + estimate_messages(messages)
