"""Provider-neutral conversation messages.

The agent loop keeps the history as a list of these; each model provider translates them to its own
wire format. They are pydantic models so that events can carry them unchanged.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class TextBlock(BaseModel):
    """Plain text written by the user or the model."""

    model_config = ConfigDict(frozen=True)
    type: Literal["text"] = "text"
    text: str


class ToolUseBlock(BaseModel):
    """A tool call requested by the model."""

    model_config = ConfigDict(frozen=True)
    type: Literal["tool_use"] = "tool_use"
    id: str
    """Stable id of the call, chosen by the provider (or the scripted model)."""
    name: str
    """Namespaced tool name, ``{server}__{tool}``."""
    input: dict[str, Any]


class ToolResultBlock(BaseModel):
    """The outcome of one tool call, fed back to the model."""

    model_config = ConfigDict(frozen=True)
    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    content: str
    is_error: bool = False


ContentBlock = Annotated[TextBlock | ToolUseBlock | ToolResultBlock, Field(discriminator="type")]


class Message(BaseModel):
    """One turn of the conversation.

    ``user`` messages carry text and tool results; ``assistant`` messages carry text and tool calls.
    """

    model_config = ConfigDict(frozen=True)
    role: Literal["user", "assistant"]
    content: list[ContentBlock]

    @property
    def text(self) -> str:
        """The concatenated text blocks of this message."""
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def tool_uses(self) -> list[ToolUseBlock]:
        """The tool calls of this message, in order."""
        return [b for b in self.content if isinstance(b, ToolUseBlock)]


class Usage(BaseModel):
    """Token usage reported by a provider for one model call."""

    input_tokens: int = 0
    output_tokens: int = 0
