"""OpenAICompatModel against a real-uvicorn fake of the Chat Completions API."""

from __future__ import annotations

import json

import pytest

from orchestrator.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock, Usage
from orchestrator.models.base import ModelError
from orchestrator.models.openai_compat import DEFAULT_BASE_URL, OpenAICompatModel, to_wire_messages
from orchestrator.models.openai_stream import ChunkAssembler
from orchestrator.models.retry import RetryAfterError, RetryingModel, RetryPolicy
from tests.orchestrator.models.fake_common import HttpError, StreamError, ToolCall, Truncated, text_reply, tool_reply
from tests.orchestrator.models.fake_openai import FakeOpenAI
from tests.orchestrator.models.helpers import READ_TOOL, collect, request, user
from tests.orchestrator.models.live_server import closed_port_url

pytestmark = pytest.mark.anyio

KEY = "sk-proj-test-0123456789"
FAST = RetryPolicy(max_attempts=3, base_delay_s=0.001, max_delay_s=0.01)


def model_for(fake: FakeOpenAI, timeout_s: float = 600) -> OpenAICompatModel:
    fake.api_key = KEY
    return OpenAICompatModel("gpt-test", api_key=KEY, base_url=fake.base_url, timeout_s=timeout_s)


@pytest.fixture(autouse=True)
def _no_openai_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


async def test_name() -> None:
    assert OpenAICompatModel("gpt-x").name == "openai:gpt-x"


async def test_text_streams_deltas_then_the_whole_message(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(text_reply("Hello, world!", chunk_size=5, input_tokens=30, output_tokens=4))

    deltas, response = await collect(model_for(fake_openai), request(user("hi")))

    assert deltas == ["Hello", ", wor", "ld!"]
    assert response.message == Message(role="assistant", content=[TextBlock(text="Hello, world!")])
    assert response.stop_reason == "end_turn"
    assert response.usage == Usage(input_tokens=30, output_tokens=4)
    [sent] = fake_openai.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.body == {
        "model": "gpt-test",
        "messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": 256,
    }


async def test_tool_calls_are_assembled_by_index(fake_openai: FakeOpenAI) -> None:
    first = ToolCall("fs__read", {"path": "src/a b.txt", "lines": [1, 20]}, id="call_A")
    second = ToolCall("fs__read", {"path": "ü/ß"}, id="call_B")
    fake_openai.script(tool_reply(first, second, text="Looking.", chunk_size=3))

    deltas, response = await collect(model_for(fake_openai), request(tools=[READ_TOOL]))

    assert "".join(deltas) == "Looking."
    assert response.stop_reason == "tool_use"
    assert response.message.content == [
        TextBlock(text="Looking."),
        ToolUseBlock(id="call_A", name="fs__read", input=first.input),
        ToolUseBlock(id="call_B", name="fs__read", input=second.input),
    ]
    assert fake_openai.requests[0].body["tools"] == [
        {
            "type": "function",
            "function": {"name": "fs__read", "description": "Read a file.", "parameters": READ_TOOL.input_schema},
        }
    ]


async def test_two_calls_send_tool_results_back(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(
        tool_reply(ToolCall("fs__read", {"path": "a"}, id="call_A"), ToolCall("fs__read", {"path": "b"}, id="call_B")),
        text_reply("a is 1, b is missing"),
    )
    model = model_for(fake_openai)
    history = [user("read a and b")]
    _, first = await collect(model, request(*history, tools=[READ_TOOL]))
    history += [
        first.message,
        user(
            ToolResultBlock(tool_use_id="call_A", content="1"),
            ToolResultBlock(tool_use_id="call_B", content="no such file", is_error=True),
        ),
    ]

    _, second = await collect(model, request(*history, tools=[READ_TOOL]))

    assert second.message.text == "a is 1, b is missing"
    sent = fake_openai.requests[1].body["messages"]
    assert sent[2] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_A", "type": "function", "function": {"name": "fs__read", "arguments": '{"path": "a"}'}},
            {"id": "call_B", "type": "function", "function": {"name": "fs__read", "arguments": '{"path": "b"}'}},
        ],
    }
    assert sent[3:] == [
        {"role": "tool", "tool_call_id": "call_A", "content": "1"},
        {"role": "tool", "tool_call_id": "call_B", "content": "ERROR: no such file"},
    ]


def test_wire_messages_put_tool_results_before_user_text() -> None:
    history = [
        Message(role="assistant", content=[TextBlock(text="ok"), ToolUseBlock(id="c1", name="x", input={"a": 1})]),
        user("also this", ToolResultBlock(tool_use_id="c1", content="done")),
    ]

    wire = to_wire_messages("", history)

    assert wire == [
        {
            "role": "assistant",
            "content": "ok",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "x", "arguments": '{"a": 1}'}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "done"},
        {"role": "user", "content": "also this"},
    ]


async def test_no_key_sends_no_authorization_header(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(text_reply("local"))

    _, response = await collect(OpenAICompatModel("llama3", base_url=fake_openai.base_url), request())

    assert response.message.text == "local"
    assert "authorization" not in fake_openai.requests[0].headers


async def test_environment_supplies_key_and_base_url(fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "env-key")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url + "/")
    fake_openai.api_key = "env-key"
    fake_openai.script(text_reply("from env"))

    _, response = await collect(OpenAICompatModel("gpt-test"), request())

    assert response.message.text == "from env"


async def test_official_endpoint_gets_max_completion_tokens() -> None:
    body = OpenAICompatModel("gpt-test", api_key="k")._body(request())

    assert OpenAICompatModel("gpt-test", api_key="k")._base_url == DEFAULT_BASE_URL
    assert body["max_completion_tokens"] == 256 and "max_tokens" not in body


async def test_rate_limit_then_success_through_retrying_model(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(HttpError(429, "Rate limit reached for gpt-test."), text_reply("ok"))
    retries: list[ModelError] = []

    async def on_retry(attempt: int, delay_s: float, error: ModelError) -> None:
        retries.append(error)

    _, response = await collect(RetryingModel(model_for(fake_openai), FAST, on_retry=on_retry), request())

    assert response.message.text == "ok"
    assert len(fake_openai.requests) == 2
    [error] = retries
    assert error.transient and error.status == 429
    assert str(error) == "openai: 429 rate_limit_exceeded: Rate limit reached for gpt-test."


async def test_retry_after_header_is_carried(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(HttpError(503, "busy", retry_after="2"))

    with pytest.raises(RetryAfterError) as caught:
        await collect(model_for(fake_openai), request())

    assert caught.value.retry_after_s == 2.0 and caught.value.status == 503


@pytest.mark.parametrize("status", [500, 502, 529])
async def test_server_errors_are_transient(fake_openai: FakeOpenAI, status: int) -> None:
    fake_openai.script(HttpError(status, "The server is overloaded."))

    with pytest.raises(ModelError) as caught:
        await collect(model_for(fake_openai), request())

    assert caught.value.transient and caught.value.status == status
    assert str(caught.value) == f"openai: {status} server_error: The server is overloaded."


@pytest.mark.parametrize(
    ("status", "message", "text"),
    [
        (400, "Invalid value for 'tools'.", "openai: 400 invalid_request_error: Invalid value for 'tools'."),
        (401, "Incorrect API key provided.", "openai: 401 invalid_api_key: Incorrect API key provided."),
        (
            404,
            "The model `gpt-nope` does not exist.",
            "openai: 404 model_not_found: The model `gpt-nope` does not exist.",
        ),
    ],
)
async def test_client_errors_are_permanent_and_not_retried(
    fake_openai: FakeOpenAI, status: int, message: str, text: str
) -> None:
    fake_openai.script(HttpError(status, message), text_reply("never reached"))

    with pytest.raises(ModelError) as caught:
        await collect(RetryingModel(model_for(fake_openai), FAST), request())

    assert not caught.value.transient and caught.value.status == status
    assert str(caught.value) == text
    assert len(fake_openai.requests) == 1


async def test_wrong_key_is_rejected_without_leaking_it(fake_openai: FakeOpenAI) -> None:
    fake_openai.api_key = "the-right-key"
    model = OpenAICompatModel("gpt-test", api_key=KEY, base_url=fake_openai.base_url)

    with pytest.raises(ModelError) as caught:
        await collect(model, request())

    assert str(caught.value) == "openai: 401 invalid_api_key: Incorrect API key provided."
    assert KEY not in str(caught.value) and KEY not in repr(caught.value)


async def test_in_stream_error_is_transient_and_retried(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(
        StreamError("server_error", "The server had an error", text_before="partial"), text_reply("whole")
    )
    model = model_for(fake_openai)

    deltas: list[str] = []
    with pytest.raises(ModelError) as caught:
        async for event in model.stream(request()):
            deltas.append(getattr(event, "text", ""))
    assert "".join(deltas) == "partial"
    assert caught.value.transient
    assert str(caught.value) == "openai: stream error server_error: The server had an error"

    _, response = await collect(RetryingModel(model, FAST), request())
    assert response.message.text == "whole"


async def test_stream_cut_before_finish_reason_is_transient(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Truncated(text_before="half a"))

    with pytest.raises(ModelError, match="before a finish_reason") as caught:
        await collect(model_for(fake_openai), request())

    assert caught.value.transient


async def test_invalid_tool_arguments_are_a_permanent_error(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(tool_reply(ToolCall("fs__read", raw_input='{"path": "a"', id="call_bad")))

    with pytest.raises(ModelError, match=r"'fs__read' \(call_bad\) has invalid JSON arguments") as caught:
        await collect(model_for(fake_openai), request())

    assert not caught.value.transient


async def test_non_object_tool_arguments_are_a_permanent_error(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(tool_reply(ToolCall("fs__read", raw_input="[1, 2]")))

    with pytest.raises(ModelError, match="not a JSON object") as caught:
        await collect(model_for(fake_openai), request())

    assert not caught.value.transient


async def test_connection_refused_is_transient() -> None:
    model = OpenAICompatModel("gpt-test", base_url=closed_port_url() + "/v1")

    with pytest.raises(ModelError, match="connection to .* failed") as caught:
        await collect(model, request())

    assert caught.value.transient and caught.value.status is None


async def test_timeout_is_transient(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(text_reply("late", delay_s=0.5))

    with pytest.raises(ModelError, match="timed out") as caught:
        await collect(model_for(fake_openai, timeout_s=0.1), request())

    assert caught.value.transient


async def test_base_url_without_scheme_is_permanent() -> None:
    with pytest.raises(ModelError, match="bad base URL") as caught:
        await collect(OpenAICompatModel("m", base_url="localhost:11434/v1"), request())

    assert not caught.value.transient


def _lines(*chunks: dict[str, object]) -> list[str]:
    return [f"data: {json.dumps(c)}" for c in chunks] + ["data: [DONE]"]


def test_ollama_style_whole_calls_without_index_and_stop_finish() -> None:
    assembler = ChunkAssembler()
    calls = [
        {"id": "call_1", "type": "function", "function": {"name": "a", "arguments": '{"x": 1}'}},
        {"id": "call_2", "type": "function", "function": {"name": "b", "arguments": "{}"}},
    ]
    lines = _lines(
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "", "tool_calls": calls}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    )
    for line in ["", ": keep-alive", *lines]:
        assembler.feed_line(line)

    response = assembler.response()

    assert response.stop_reason == "tool_use"
    assert response.message.content == [
        ToolUseBlock(id="call_1", name="a", input={"x": 1}),
        ToolUseBlock(id="call_2", name="b", input={}),
    ]


def test_missing_call_id_gets_one_and_length_maps_to_max_tokens() -> None:
    assembler = ChunkAssembler()
    for line in _lines(
        {
            "choices": [
                {"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"name": "a", "arguments": ""}}]}}
            ]
        },
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "null"}}]}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]},
    ):
        assembler.feed_line(line)

    response = assembler.response()

    [use] = response.message.tool_uses
    assert use.id.startswith("call_") and use.input == {}
    assert response.stop_reason == "max_tokens"


async def test_key_echoed_by_the_server_is_scrubbed(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(HttpError(403, f"Key {KEY} is not allowed to use this model."))

    with pytest.raises(ModelError) as caught:
        await collect(model_for(fake_openai), request())

    assert (
        str(caught.value)
        == "openai: 403 unsupported_country_region_territory: Key *** is not allowed to use this model."
    )
    assert not caught.value.transient and caught.value.status == 403


async def test_credentials_in_base_url_stay_out_of_errors() -> None:
    base = closed_port_url().replace("http://", "http://user:hunter2@") + "/v1?api-key=hunter2"
    with pytest.raises(ModelError) as caught:
        await collect(OpenAICompatModel("m", base_url=base), request())

    assert "hunter2" not in str(caught.value)
    assert caught.value.transient


def test_refusal_field_becomes_text_with_refusal_stop() -> None:
    assembler = ChunkAssembler()
    for line in _lines(
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": None, "refusal": "I can't help"}}]},
        {"choices": [{"index": 0, "delta": {"refusal": " with that."}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ):
        assembler.feed_line(line)

    response = assembler.response()

    assert response.message.text == "I can't help with that."
    assert response.stop_reason == "refusal"


def test_text_blocks_of_one_message_stay_apart() -> None:
    # On resume Loom adds its note as a second text block of the user's turn; glued on, it would read as one
    # sentence of the user's ("...tests[Loom] This run was interrupted...").
    note = "[Loom] This run was interrupted and has been resumed."
    history = [
        Message(role="user", content=[TextBlock(text="fix the tests"), TextBlock(text=note)]),
        Message(role="assistant", content=[TextBlock(text="First."), TextBlock(text="Second.")]),
    ]
    wire = to_wire_messages("", history)
    assert wire == [
        {"role": "user", "content": f"fix the tests\n\n{note}"},
        {"role": "assistant", "content": "First.\n\nSecond."},
    ]
