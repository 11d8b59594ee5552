"""Streamed tool-call arguments: every provider yields them as it reads them, and they add up to the stored call.

The Anthropic provider runs on the real ``anthropic`` SDK and the OpenAI-compatible one on ``httpx``, both
against the fake APIs speaking the real streaming wire format (``input_json_delta``; ``delta.tool_calls``).
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from orchestrator.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from orchestrator.models.anthropic import AnthropicModel
from orchestrator.models.base import ModelResponse, TextDelta, ToolCallDelta
from orchestrator.models.openai_compat import OpenAICompatModel
from orchestrator.models.openai_stream import ChunkAssembler
from orchestrator.models.scripted import FunctionModel, ScriptedModel
from tests.orchestrator.models.fake_anthropic import FakeAnthropic
from tests.orchestrator.models.fake_common import ToolCall, tool_reply
from tests.orchestrator.models.fake_openai import FakeOpenAI
from tests.orchestrator.models.helpers import READ_TOOL, calls_from, collect_all, request

pytestmark = pytest.mark.anyio

WRITE = ToolCall(
    "fs__write",
    {"path": "notes/ünïcode plan.md", "content": "# Plan\n\n" + 'line with "quotes" and \\ slashes\n' * 12},
    id="call_W",
)
READ = ToolCall("fs__read", {"path": "a", "lines": [1, 20], "opts": {"raw": True, "n": None}}, id="call_R")


def stored_calls(response: ModelResponse) -> list[tuple[str, str, dict[str, Any]]]:
    return [(u.id, u.name, u.input) for u in response.message.tool_uses]


def parsed(calls: list[tuple[str, str, str]]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(call_id, name, json.loads(arguments) if arguments.strip() else {}) for call_id, name, arguments in calls]


async def test_anthropic_streams_each_tool_use_as_it_comes_and_the_pieces_are_the_stored_input(
    fake_anthropic: FakeAnthropic,
) -> None:
    fake_anthropic.script(tool_reply(WRITE, READ, text="Writing the plan.", chunk_size=5))
    model = AnthropicModel("claude-x", api_key="k", base_url=fake_anthropic.base_url)

    deltas, response = await collect_all(model, request(tools=[READ_TOOL]))

    streamed = calls_from(deltas)
    # Positions count tool calls only: the text block before them is the API's block 0.
    assert (
        parsed(streamed)
        == stored_calls(response)
        == [
            ("call_W", "fs__write", WRITE.input),
            ("call_R", "fs__read", READ.input),
        ]
    )
    # The pieces are the API's own JSON text, exactly, cut as it streamed it.
    assert [arguments for _, _, arguments in streamed] == [WRITE.wire_input(), READ.wire_input()]
    write_pieces = [d for d in deltas if isinstance(d, ToolCallDelta) and d.index == 0]
    assert write_pieces[0].arguments == "" and write_pieces[0].name == "fs__write"  # content_block_start names it
    assert len(write_pieces) > 20
    # The text came before the calls, as it was written.
    kinds = [type(d) for d in deltas]
    assert kinds.index(ToolCallDelta) > max(i for i, k in enumerate(kinds) if k is TextDelta)


async def test_anthropic_tool_use_without_arguments_is_named_with_empty_arguments(
    fake_anthropic: FakeAnthropic,
) -> None:
    fake_anthropic.script(tool_reply(ToolCall("clock__now", raw_input="", id="toolu_N")))
    model = AnthropicModel("claude-x", api_key="k", base_url=fake_anthropic.base_url)

    deltas, response = await collect_all(model, request())

    assert deltas == [ToolCallDelta(0, "", call_id="toolu_N", name="clock__now")]
    assert stored_calls(response) == [("toolu_N", "clock__now", {})]


@pytest.mark.parametrize("call_index", [True, False], ids=["with-index", "without-index"])
async def test_openai_streams_tool_call_deltas_and_the_pieces_are_the_stored_arguments(
    fake_openai: FakeOpenAI, call_index: bool
) -> None:
    fake_openai.script(tool_reply(WRITE, READ, text="Writing the plan.", chunk_size=5, call_index=call_index))
    model = OpenAICompatModel("gpt-x", api_key="k", base_url=fake_openai.base_url)

    deltas, response = await collect_all(model, request(tools=[READ_TOOL]))

    streamed = calls_from(deltas)
    assert (
        parsed(streamed)
        == stored_calls(response)
        == [
            ("call_W", "fs__write", WRITE.input),
            ("call_R", "fs__read", READ.input),
        ]
    )
    assert [arguments for _, _, arguments in streamed] == [WRITE.wire_input(), READ.wire_input()]
    first = next(d for d in deltas if isinstance(d, ToolCallDelta))
    assert (first.index, first.call_id, first.name) == (0, "call_W", "fs__write")
    assert sum(isinstance(d, ToolCallDelta) and d.index == 0 for d in deltas) > 20


def _line(delta: dict[str, Any], finish: str | None = None) -> str:
    return "data: " + json.dumps({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


def test_openai_whole_calls_in_one_chunk_give_one_piece_each_and_repeated_ids_add_nothing() -> None:
    assembler = ChunkAssembler()
    whole = [
        {"id": "call_1", "type": "function", "function": {"name": "a", "arguments": '{"x": 1}'}},
        {"id": "call_2", "type": "function", "function": {"name": "b", "arguments": "{}"}},
    ]
    deltas = [
        *assembler.feed_line(_line({"role": "assistant", "content": "Two.", "tool_calls": whole})),
        # Some servers resend the id (and name) with every piece; a piece with nothing new is no delta.
        *assembler.feed_line(_line({"tool_calls": [{"index": 1, "id": "call_2", "function": {"name": "b"}}]})),
        *assembler.feed_line(_line({}, "stop")),
    ]

    assert deltas == [
        TextDelta("Two."),
        ToolCallDelta(0, '{"x": 1}', call_id="call_1", name="a"),
        ToolCallDelta(1, "{}", call_id="call_2", name="b"),
    ]
    assert stored_calls(assembler.response()) == [("call_1", "a", {"x": 1}), ("call_2", "b", {})]


def test_openai_positions_follow_the_stream_whatever_the_server_numbers() -> None:
    assembler = ChunkAssembler()
    deltas = [
        *assembler.feed_line(_line({"tool_calls": [{"index": 3, "id": "c3", "function": {"name": "a"}}]})),
        *assembler.feed_line(_line({"tool_calls": [{"index": 3, "function": {"arguments": '{"k": '}}]})),
        *assembler.feed_line(_line({"tool_calls": [{"index": 7, "id": "c7", "function": {"name": "b"}}]})),
        *assembler.feed_line(_line({"tool_calls": [{"index": 3, "function": {"arguments": "2}"}}]})),
        *assembler.feed_line(_line({}, "tool_calls")),
    ]

    assert parsed(calls_from(deltas)) == stored_calls(assembler.response()) == [("c3", "a", {"k": 2}), ("c7", "b", {})]


async def test_a_paced_scripted_turn_streams_each_calls_arguments_in_chunks_after_its_text() -> None:
    arguments = {"path": "out/report.md", "content": "é" * 50, "n": [1, 2.5, None, True]}
    calls = [{"name": "fs__write", "arguments": arguments}, {"name": "x__y"}]
    model = ScriptedModel.from_turns([{"text": "Writing it.", "tool_calls": calls, "chunk_delay_s": 0.001}])

    deltas, response = await collect_all(model, request())

    streamed = calls_from(deltas)
    assert parsed(streamed) == stored_calls(response)
    assert stored_calls(response)[0][2] == arguments
    assert [type(d) for d in deltas][0] is TextDelta
    assert all(len(d.arguments) <= 48 for d in deltas if isinstance(d, ToolCallDelta))
    assert streamed[1][1:] == ("x__y", "{}")


async def test_scripted_arguments_are_paced_like_its_text_and_quote_earlier_results() -> None:
    model = ScriptedModel.from_turns(
        [
            {"tool_calls": [{"id": "ls", "name": "fs__list"}]},
            {
                "tool_calls": [{"name": "fs__write", "arguments": {"path": "r.md", "content": "found {{result:ls}}"}}],
                "chunk_chars": 4,
                "chunk_delay_s": 0.01,
            },
        ]
    )
    _, first = await collect_all(model, request())
    [listing] = first.message.tool_uses
    history = [
        Message(role="user", content=[TextBlock(text="go")]),
        first.message,
        Message(role="user", content=[ToolResultBlock(tool_use_id=listing.id, content="a.txt b.txt")]),
    ]

    started = time.perf_counter()
    deltas, second = await collect_all(model, request(*history))
    took = time.perf_counter() - started

    [(_, name, text)] = calls_from(deltas)
    assert name == "fs__write" and json.loads(text) == {"path": "r.md", "content": "found a.txt b.txt"}
    assert second.message.tool_uses == [
        ToolUseBlock(id=second.message.tool_uses[0].id, name=name, input=json.loads(text))
    ]
    pieces = sum(isinstance(d, ToolCallDelta) for d in deltas)
    assert pieces == -(-len(text) // 4) and took >= (pieces - 1) * 0.01 * 0.9


async def test_an_unpaced_scripted_turn_streams_only_its_text_and_sends_the_calls_whole() -> None:
    # Written in one instant, its arguments could reach a follower only by luck: they come in the message alone.
    model = ScriptedModel.from_turns([{"text": "Now.", "tool_calls": [{"name": "t__go", "arguments": {"a": 1}}]}])

    deltas, response = await collect_all(model, request())

    assert deltas == [TextDelta("Now.")]
    assert stored_calls(response) == [("toolu_0000_0", "t__go", {"a": 1})]


async def test_function_model_streams_arguments_too() -> None:
    model = FunctionModel(
        lambda req: {"tool_calls": [{"name": "t__go", "arguments": {"a": "b"}}], "chunk_delay_s": 0.001}
    )

    deltas, response = await collect_all(model, request())

    assert parsed(calls_from(deltas)) == stored_calls(response)
    assert response.message.tool_uses[0].input == {"a": "b"}
