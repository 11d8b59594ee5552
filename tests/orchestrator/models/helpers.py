"""Small helpers shared by the provider tests."""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.messages import ContentBlock, Message, TextBlock
from orchestrator.models.base import Model, ModelRequest, ModelResponse, TextDelta, ToolSpec

READ_TOOL = ToolSpec(
    name="fs__read",
    description="Read a file.",
    input_schema={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)


def user(*blocks: ContentBlock | str) -> Message:
    return Message(role="user", content=[TextBlock(text=b) if isinstance(b, str) else b for b in blocks])


def request(*messages: Message, system: str = "You are terse.", tools: Sequence[ToolSpec] = ()) -> ModelRequest:
    return ModelRequest(system=system, messages=list(messages) or [user("hi")], tools=tools, max_tokens=256)


async def collect(model: Model, req: ModelRequest) -> tuple[list[str], ModelResponse]:
    """Run one call; return its text deltas and its response, checking the response comes last."""
    deltas: list[str] = []
    responses: list[ModelResponse] = []
    async for event in model.stream(req):
        assert not responses, "nothing may follow the ModelResponse"
        if isinstance(event, TextDelta):
            deltas.append(event.text)
        else:
            responses.append(event)
    assert len(responses) == 1
    return deltas, responses[0]
