"""Token estimates for what a provider has not counted yet.

Providers report exact usage only after a call; before it (is the next request past the threshold?
is a summary shorter than what it replaces?) Loom estimates. About four characters a token is what
Anthropic and OpenAI tokenizers give for English and code, and it errs on the high side for both,
which is the safe side for a context limit. A tokenizer per provider would be exact but would add a
dependency and a download per model for a decision that only needs to be roughly right. An image is counted
by its pixels (:func:`estimate_image`), as providers bill it, not by the length of its data.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from orchestrator.messages import Attachment, Message, TextBlock, ToolResultBlock, ToolUseBlock

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
            total += estimate_text(block.content) + sum(estimate_image(image) for image in block.images)
    return total


IMAGE_MAX_TOKENS = 1600
"""What an image costs at most: providers scale a larger one down (Anthropic to about 1.15 megapixels)."""
PIXELS_PER_TOKEN = 750
"""Anthropic's rule of thumb for an image: width × height / 750 tokens."""


def estimate_image(image: Attachment) -> int:
    """Estimated tokens of an image a model is shown: by its pixels, never by its base64 (which is not text to it).

    An image whose size is unknown counts as the most an image can cost.
    """
    if not image.width or not image.height:
        return IMAGE_MAX_TOKENS
    return min(IMAGE_MAX_TOKENS, -(-image.width * image.height // PIXELS_PER_TOKEN))


def estimate_messages(messages: Iterable[Message]) -> int:
    """Estimated tokens of a sequence of messages."""
    return sum(estimate_message(m) for m in messages)


_SCHEMA_TOKENS: OrderedDict[int, tuple[dict[str, Any], int]] = OrderedDict()
"""Estimated tokens of input schemas by the schema object (held, so its id is not reused while its entry lives):
every session's tools are listed over the same schema objects, and serialising them to count is the cost."""
_SCHEMAS = 1024


def _schema_tokens(schema: dict[str, Any]) -> int:
    found = _SCHEMA_TOKENS.get(id(schema))
    if found is not None and found[0] is schema:
        return found[1]
    tokens = estimate_text(json.dumps(schema, ensure_ascii=False))
    _SCHEMA_TOKENS[id(schema)] = (schema, tokens)
    if len(_SCHEMA_TOKENS) > _SCHEMAS:
        _SCHEMA_TOKENS.popitem(last=False)
    return tokens


def estimate_tools(tools: Sequence[ToolSpec]) -> int:
    """Estimated tokens of the tool definitions sent with every request (schemas are never changed in place)."""
    return sum(
        BLOCK_OVERHEAD + estimate_text(t.name) + estimate_text(t.description) + _schema_tokens(t.input_schema)
        for t in tools
    )


def estimate_overhead(system: str, tools: Sequence[ToolSpec] = ()) -> int:
    """Estimated tokens every request spends before its first message: the system prompt and the tool definitions."""
    return estimate_text(system) + estimate_tools(tools)


def estimate_request(system: str, messages: Iterable[Message], tools: Sequence[ToolSpec] = ()) -> int:
    """Estimated input tokens of a whole request: system prompt, tools and messages."""
    return estimate_overhead(system, tools) + estimate_messages(messages)
