"""Small helpers shared by the provider tests."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

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


def clear_anthropic_credentials(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    """No Anthropic credential of any kind in the environment, and no profile files the SDK could find."""
    for var in (
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_PROFILE",
        "ANTHROPIC_CONFIG_DIR",
        "ANTHROPIC_IDENTITY_TOKEN",
        "ANTHROPIC_IDENTITY_TOKEN_FILE",
        "ANTHROPIC_FEDERATION_RULE_ID",
    ):
        monkeypatch.delenv(var, raising=False)
    # Keep the SDK's profile discovery (~/.config/anthropic) away from the developer's real files.
    monkeypatch.setenv("HOME", str(home))
