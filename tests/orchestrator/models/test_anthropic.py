"""AnthropicModel against a real-uvicorn fake of the Messages API, through the real SDK."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock, Usage
from orchestrator.models.anthropic import AnthropicModel, to_wire_messages
from orchestrator.models.base import ModelError
from orchestrator.models.retry import RetryAfterError, RetryingModel, RetryPolicy
from tests.orchestrator.models.fake_anthropic import FakeAnthropic
from tests.orchestrator.models.fake_common import (
    HttpError,
    StreamError,
    ToolCall,
    Truncated,
    text_reply,
    tool_reply,
)
from tests.orchestrator.models.helpers import READ_TOOL, clear_anthropic_credentials, collect, request, user
from tests.orchestrator.models.live_server import closed_port_url

pytestmark = pytest.mark.anyio

KEY = "sk-ant-test-0123456789"
FAST = RetryPolicy(max_attempts=3, base_delay_s=0.001, max_delay_s=0.01)


def model_for(fake: FakeAnthropic, **kwargs: object) -> AnthropicModel:
    fake.api_key = KEY
    return AnthropicModel("claude-test", api_key=KEY, base_url=fake.base_url, **kwargs)  # type: ignore[arg-type]


async def test_name() -> None:
    assert AnthropicModel("claude-x", api_key="k").name == "anthropic:claude-x"


async def test_text_streams_deltas_then_the_whole_message(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.script(text_reply("Hello, world!", chunk_size=4, input_tokens=21, output_tokens=9))

    deltas, response = await collect(model_for(fake_anthropic), request(user("hi")))

    assert deltas == ["Hell", "o, w", "orld", "!"]
    assert response.message == Message(role="assistant", content=[TextBlock(text="Hello, world!")])
    assert response.stop_reason == "end_turn"
    assert response.usage == Usage(input_tokens=21, output_tokens=9)
    [sent] = fake_anthropic.requests
    assert sent.path == "/v1/messages"
    assert sent.body["model"] == "claude-test"
    assert sent.body["stream"] is True
    assert sent.body["max_tokens"] == 256
    assert sent.body["system"] == "You are terse."
    assert sent.body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert "tools" not in sent.body
    assert "anthropic-version" in sent.headers


async def test_tool_use_input_is_assembled_from_partial_json(fake_anthropic: FakeAnthropic) -> None:
    call = ToolCall("fs__read", {"path": "src/a b.txt", "lines": [1, 20], "opts": {"raw": True}}, id="toolu_01")
    fake_anthropic.script(tool_reply(call, text="Let me look.", chunk_size=3))

    deltas, response = await collect(model_for(fake_anthropic), request(tools=[READ_TOOL]))

    assert "".join(deltas) == "Let me look."
    assert response.stop_reason == "tool_use"
    assert response.message.content == [
        TextBlock(text="Let me look."),
        ToolUseBlock(id="toolu_01", name="fs__read", input=call.input),
    ]
    assert fake_anthropic.requests[0].body["tools"] == [
        {"name": "fs__read", "description": "Read a file.", "input_schema": READ_TOOL.input_schema}
    ]


async def test_tool_without_arguments_gets_empty_input(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.script(tool_reply(ToolCall("clock__now", raw_input="")))

    _, response = await collect(model_for(fake_anthropic), request())

    [use] = response.message.tool_uses
    assert use.input == {}


async def test_two_calls_send_tool_results_back(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.script(
        tool_reply(
            ToolCall("fs__read", {"path": "a"}, id="toolu_A"), ToolCall("fs__read", {"path": "b"}, id="toolu_B")
        ),
        text_reply("a is 1, b is missing"),
    )
    model = model_for(fake_anthropic)
    history = [user("read a and b")]
    _, first = await collect(model, request(*history, tools=[READ_TOOL]))
    assert [u.id for u in first.message.tool_uses] == ["toolu_A", "toolu_B"]
    history += [
        first.message,
        user(
            ToolResultBlock(tool_use_id="toolu_A", content="1"),
            ToolResultBlock(tool_use_id="toolu_B", content="no such file", is_error=True),
        ),
    ]

    _, second = await collect(model, request(*history, tools=[READ_TOOL]))

    assert second.message.text == "a is 1, b is missing"
    sent = fake_anthropic.requests[1].body["messages"]
    assert sent[1] == {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "toolu_A", "name": "fs__read", "input": {"path": "a"}},
            {"type": "tool_use", "id": "toolu_B", "name": "fs__read", "input": {"path": "b"}},
        ],
    }
    assert sent[2] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_A", "content": "1", "is_error": False},
            {"type": "tool_result", "tool_use_id": "toolu_B", "content": "no such file", "is_error": True},
        ],
    }


def test_wire_messages_put_tool_results_first_and_drop_empty_text() -> None:
    history = [
        Message(role="assistant", content=[TextBlock(text=""), ToolUseBlock(id="t1", name="x", input={})]),
        user("and also this", ToolResultBlock(tool_use_id="t1", content="ok")),
    ]

    wire = to_wire_messages(history)

    assert wire[0]["content"] == [{"type": "tool_use", "id": "t1", "name": "x", "input": {}}]
    assert [b["type"] for b in wire[1]["content"]] == ["tool_result", "text"]  # type: ignore[index]


async def test_rate_limit_then_success_through_retrying_model(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.script(HttpError(429, "Number of request tokens has exceeded your rate limit."), text_reply("ok"))
    retries: list[tuple[int, float, ModelError]] = []

    async def on_retry(attempt: int, delay_s: float, error: ModelError) -> None:
        retries.append((attempt, delay_s, error))

    model = RetryingModel(model_for(fake_anthropic), FAST, on_retry=on_retry)
    _, response = await collect(model, request())

    assert response.message.text == "ok"
    assert len(fake_anthropic.requests) == 2
    [(attempt, delay, error)] = retries
    assert attempt == 1
    assert 0 <= delay <= FAST.base_delay_s
    assert error.transient and error.status == 429
    assert str(error) == "anthropic: 429 rate_limit_error: Number of request tokens has exceeded your rate limit."


async def test_retry_after_header_is_carried(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.script(HttpError(429, "slow down", retry_after="7"))

    with pytest.raises(RetryAfterError) as caught:
        await collect(model_for(fake_anthropic), request())

    assert caught.value.retry_after_s == 7.0
    assert caught.value.transient


@pytest.mark.parametrize("status", [500, 529])
async def test_overloaded_and_server_errors_are_transient(fake_anthropic: FakeAnthropic, status: int) -> None:
    fake_anthropic.script(HttpError(status, "Overloaded"))

    with pytest.raises(ModelError) as caught:
        await collect(model_for(fake_anthropic), request())

    assert caught.value.transient
    assert caught.value.status == status
    expected_type = "overloaded_error" if status == 529 else "api_error"
    assert str(caught.value) == f"anthropic: {status} {expected_type}: Overloaded"


@pytest.mark.parametrize(
    ("status", "message", "text"),
    [
        (400, "max_tokens: field required", "anthropic: 400 invalid_request_error: max_tokens: field required"),
        (401, "invalid x-api-key", "anthropic: 401 authentication_error: invalid x-api-key"),
        (404, "model: claude-nope", "anthropic: 404 not_found_error: model: claude-nope"),
    ],
)
async def test_client_errors_are_permanent_and_not_retried(
    fake_anthropic: FakeAnthropic, status: int, message: str, text: str
) -> None:
    fake_anthropic.script(HttpError(status, message), text_reply("never reached"))

    with pytest.raises(ModelError) as caught:
        await collect(RetryingModel(model_for(fake_anthropic), FAST), request())

    assert not caught.value.transient
    assert caught.value.status == status
    assert str(caught.value) == text
    assert len(fake_anthropic.requests) == 1


async def test_wrong_key_is_rejected_without_leaking_it(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.api_key = "the-right-key"
    model = AnthropicModel("claude-test", api_key=KEY, base_url=fake_anthropic.base_url)

    with pytest.raises(ModelError) as caught:
        await collect(model, request())

    assert str(caught.value) == "anthropic: 401 authentication_error: invalid x-api-key"
    assert KEY not in str(caught.value) and KEY not in repr(caught.value)


async def test_in_stream_error_is_transient_and_retried(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.script(StreamError("overloaded_error", "Overloaded", text_before="partial"), text_reply("whole"))
    model = model_for(fake_anthropic)

    deltas: list[str] = []
    with pytest.raises(ModelError) as caught:
        async for event in model.stream(request()):
            deltas.append(getattr(event, "text", ""))
    assert "".join(deltas) == "partial"
    assert caught.value.transient
    assert str(caught.value) == "anthropic: stream error overloaded_error: Overloaded"

    _, response = await collect(RetryingModel(model, FAST), request())
    assert response.message.text == "whole"


async def test_in_stream_api_error_is_transient(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.script(StreamError("api_error", "Internal server error"))

    with pytest.raises(ModelError) as caught:
        await collect(model_for(fake_anthropic), request())

    assert caught.value.transient


async def test_stream_cut_before_message_stop_is_transient(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.script(Truncated(text_before="half a"))

    with pytest.raises(ModelError, match="before message_stop") as caught:
        await collect(model_for(fake_anthropic), request())

    assert caught.value.transient


async def test_invalid_tool_json_is_permanent(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.script(tool_reply(ToolCall("fs__read", raw_input='{"path": "a"')))

    with pytest.raises(ModelError, match="'fs__read'.*invalid JSON input") as caught:
        await collect(model_for(fake_anthropic), request())

    assert not caught.value.transient


async def test_connection_refused_is_transient() -> None:
    model = AnthropicModel("claude-test", api_key=KEY, base_url=closed_port_url())

    with pytest.raises(ModelError, match="connection to .* failed") as caught:
        await collect(model, request())

    assert caught.value.transient
    assert caught.value.status is None


async def test_timeout_is_transient(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.script(text_reply("late", delay_s=0.5))

    with pytest.raises(ModelError, match="timed out") as caught:
        await collect(model_for(fake_anthropic, timeout_s=0.1), request())

    assert caught.value.transient


async def test_missing_api_key_is_a_permanent_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    clear_anthropic_credentials(monkeypatch, tmp_path)
    model = AnthropicModel("claude-test", base_url=closed_port_url())

    with pytest.raises(ModelError, match="set ANTHROPIC_API_KEY") as caught:
        await collect(model, request())

    assert not caught.value.transient


async def test_broken_sdk_profile_is_a_permanent_error_not_a_constructor_crash(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    clear_anthropic_credentials(monkeypatch, tmp_path)
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path / "empty"))
    model = AnthropicModel("claude-test", base_url=closed_port_url())

    with pytest.raises(ModelError, match="anthropic: credentials: Config file not found") as caught:
        await collect(model, request())

    assert not caught.value.transient


async def test_environment_supplies_key_and_base_url(
    fake_anthropic: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "env-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_anthropic.base_url)
    fake_anthropic.api_key = "env-key"
    fake_anthropic.script(text_reply("from env"))

    _, response = await collect(AnthropicModel("claude-test"), request())

    assert response.message.text == "from env"


async def test_key_echoed_by_a_gateway_is_scrubbed(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.script(HttpError(403, f"key {KEY} lacks access"))

    with pytest.raises(ModelError) as caught:
        await collect(model_for(fake_anthropic), request())

    assert str(caught.value) == "anthropic: 403 permission_error: key *** lacks access"
