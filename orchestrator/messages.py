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


class Attachment(BaseModel):
    """A part of a tool result that is not text: an image, a sound, or a binary resource.

    The result's text always says what the part was, at its place among the text: ``[label]`` for an image a model
    is shown (:attr:`label`), ``[label: why not]`` for anything left out. Only an image
    a model can be shown keeps its ``data``; providers that take images in tool results send it as an image
    block, the others say it was left out. Audio and other binary parts keep no data: no provider here takes
    them in a tool result, so the text's line is what the model gets and this is what a client shows.
    """

    model_config = ConfigDict(frozen=True)
    kind: Literal["image", "audio", "blob"]
    """``blob``: binary data of any other type (an embedded PDF, say)."""
    mime_type: str
    """The media type as the bytes say it is (a server's claim is checked against an image's signature)."""
    size: int
    """Bytes, decoded."""
    width: int | None = None
    """Pixels, for an image whose header gives them (as do PNG, JPEG, GIF and WebP)."""
    height: int | None = None
    """Pixels, like ``width``."""
    uri: str = ""
    """For a part of an embedded resource: the resource's URI."""
    data: str = ""
    """Base64, for an image a model may be shown; empty for everything else (and for an image left out)."""

    @property
    def label(self) -> str:
        """:attr:`summary`, after the resource's URI for a part of an embedded resource."""
        return f"resource {self.uri}: {self.summary}" if self.uri else self.summary

    @property
    def summary(self) -> str:
        """What the part is, in a few words: ``image 640×480 png, 12 KB``."""
        if self.kind == "blob":
            return f"{self.mime_type}, {size_text(self.size)}"
        subtype = self.mime_type.partition("/")[2] or self.mime_type
        dims = f" {self.width}×{self.height}" if self.width and self.height else ""
        return f"{self.kind}{dims} {subtype}, {size_text(self.size)}"


def size_text(size: int) -> str:
    """A byte count as a person reads it: ``800 B``, ``12 KB``, ``4.3 MB``."""
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{round(size / 1024)} KB"
    return f"{size / (1024 * 1024):.1f} MB"


class ToolResultBlock(BaseModel):
    """The outcome of one tool call, fed back to the model."""

    model_config = ConfigDict(frozen=True)
    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    content: str
    is_error: bool = False
    attachments: list[Attachment] = Field(default_factory=list)
    """The result's images (and what else was not text), in order; ``content`` has a line for each."""

    @property
    def images(self) -> list[Attachment]:
        """The images a model may be shown (those that kept their data)."""
        return [a for a in self.attachments if a.kind == "image" and a.data]


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
