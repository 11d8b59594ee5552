"""Small helpers shared by the provider tests."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from orchestrator.messages import ContentBlock, Message, TextBlock
from orchestrator.models.base import Model, ModelRequest, ModelResponse, TextDelta, ToolCallDelta, ToolSpec

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
    deltas, response = await collect_all(model, req)
    return [d.text for d in deltas if isinstance(d, TextDelta)], response


async def collect_all(model: Model, req: ModelRequest) -> tuple[list[TextDelta | ToolCallDelta], ModelResponse]:
    """Run one call; return every live delta in order and the response, checking the response comes last."""
    deltas: list[TextDelta | ToolCallDelta] = []
    responses: list[ModelResponse] = []
    async for event in model.stream(req):
        assert not responses, "nothing may follow the ModelResponse"
        if isinstance(event, ModelResponse):
            responses.append(event)
        else:
            deltas.append(event)
    assert len(responses) == 1
    return deltas, responses[0]


def calls_from(deltas: Sequence[TextDelta | ToolCallDelta]) -> list[tuple[str, str, str]]:
    """``(call_id, name, arguments)`` per call, by position, from the tool-call pieces as a follower joins them.

    Checks what a client relies on: positions count from 0 without a gap, and each call is named by its first piece.
    """
    calls: dict[int, list[str]] = {}
    for delta in deltas:
        if not isinstance(delta, ToolCallDelta):
            continue
        if delta.index not in calls:
            assert delta.name, f"call {delta.index}'s first piece does not name its tool: {delta}"
            calls[delta.index] = [delta.call_id, delta.name, ""]
        else:
            assert not delta.name or delta.name == calls[delta.index][1], delta
        calls[delta.index][2] += delta.arguments
    assert sorted(calls) == list(range(len(calls)))
    return [(c[0], c[1], c[2]) for _, c in sorted(calls.items())]


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
