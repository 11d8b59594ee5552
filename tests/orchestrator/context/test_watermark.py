"""The context meter: provider usage when reported, estimates for what came after, full estimates otherwise."""

from __future__ import annotations

from orchestrator.context.tokens import estimate_message, estimate_request
from orchestrator.context.watermark import ContextMeter
from orchestrator.messages import Message, TextBlock, ToolResultBlock, Usage
from orchestrator.models.profiles import ModelProfile


def user(text: str) -> Message:
    return Message(role="user", content=[TextBlock(text=text)])


def assistant(text: str) -> Message:
    return Message(role="assistant", content=[TextBlock(text=text)])


def test_reported_usage_is_used_and_later_messages_are_estimated() -> None:
    meter = ContextMeter("anthropic:x", ModelProfile(context_window=10_000))
    history = [user("hello"), assistant("hi")]
    event = meter.observe(
        Usage(input_tokens=900, output_tokens=100), "sys", history, [], session_id="s", run_id="r", step=1
    )
    assert (event.used_tokens, event.source, event.window, event.ratio) == (1000, "provider", 10_000, 0.1)
    result = Message(role="user", content=[ToolResultBlock(tool_use_id="t", content="x" * 4000)])
    history.append(result)
    assert meter.used("sys", history) == 1000 + estimate_message(result)


def test_no_reported_input_means_a_full_estimate() -> None:
    meter = ContextMeter("scripted:x", ModelProfile(context_window=1000))
    history = [user("a" * 3400), assistant("ok")]
    event = meter.observe(Usage(output_tokens=1), "system", history, [], session_id="s", run_id="r", step=1)
    assert event.source == "estimate"
    assert event.used_tokens == estimate_request("system", history)
    assert event.ratio == round(event.used_tokens / 1000, 4)
    assert event.ratio > 0.8
    assert meter.over_threshold(event.used_tokens)


def test_a_replaced_history_falls_back_to_an_estimate() -> None:
    meter = ContextMeter("anthropic:x", ModelProfile(context_window=100_000))
    history = [user("hello"), assistant("hi")]
    meter.observe(Usage(input_tokens=50_000, output_tokens=10), "s", history, [], session_id="s", run_id="r", step=1)
    compacted = [user("summary"), assistant("hi again")]
    assert meter.used("s", compacted) == estimate_request("s", compacted)
    assert not meter.over_threshold(meter.used("s", compacted))


def test_the_running_estimate_matches_a_full_one_as_the_history_grows_and_is_replaced() -> None:
    meter = ContextMeter("scripted:x", ModelProfile(context_window=100_000))
    history: list[Message] = []
    for i in range(30):
        history.append(user(f"question {i} " * (i + 1)))
        assert meter.used("sys", history) == estimate_request("sys", history)
        history.append(assistant(f"answer {i}"))
        meter.observe(Usage(), "sys", history, [], session_id="s", run_id="r", step=i)
    replaced = [user("summary"), *history[-4:]]
    assert meter.used("sys", replaced) == estimate_request("sys", replaced)
    assert meter.used("other system prompt", replaced) == estimate_request("other system prompt", replaced)
