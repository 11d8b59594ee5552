"""Compaction: what is cut, what the summariser is asked, which summaries are accepted, what gets recorded."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest

from orchestrator.context.compaction import (
    SECTIONS,
    CompactionPlan,
    check_summary,
    compact,
    plan_compaction,
    preview_compaction,
    summary_request,
)
from orchestrator.context.history import rebuild_history, summary_text
from orchestrator.context.tokens import estimate_messages
from orchestrator.events import (
    AssistantMessage,
    CompactionFailed,
    ContextCompacted,
    Event,
    RunStarted,
    ToolCallStarted,
)
from orchestrator.messages import Message, TextBlock, ToolResultBlock
from orchestrator.models.base import ModelRequest, ModelResponse
from orchestrator.models.scripted import FunctionModel, ScriptedTurn
from tests.orchestrator.context.test_history import SESSION, Log, assert_well_formed, assistant_seq


def long_session(turns: int = 8, result_chars: int = 4000) -> Log:
    log = Log()
    for _ in range(turns):
        log.turn(result_chars=result_chars)
    return log


def good_summary(plan: CompactionPlan, *, filler: str = "") -> str:
    """A summary that passes the checks: every section, every instruction verbatim."""
    quoted = "\n".join(f'- "{i}"' for i in plan.instructions)
    body = {
        "Goal and constraints": quoted,
        "Decisions": "Read each file with fs__read.",
        "Files and state": "file0.txt ... read, unchanged.",
        "Work done": "Read the files (tool results seen) and reported their sizes." + filler,
        "Open items": "none",
        "Next step": "Wait for the next task.",
    }
    return "\n\n".join(f"## {name}\n{text}" for name, text in body.items())


def record(log: Log, event: ContextCompacted | CompactionFailed | None) -> ContextCompacted:
    assert isinstance(event, ContextCompacted)
    stored = log.add(event)
    assert isinstance(stored, ContextCompacted)
    return stored


class Summariser:
    """A model (a :class:`FunctionModel`) answering each call from ``answer``, counting the calls."""

    def __init__(self, answer: Callable[[ModelRequest], str | dict[str, Any]]) -> None:
        self.requests: list[ModelRequest] = []

        def turn(request: ModelRequest) -> ScriptedTurn | dict[str, Any]:
            self.requests.append(request)
            reply = answer(request)
            return {"text": reply} if isinstance(reply, str) else reply

        self.model = FunctionModel(turn, name="summariser")

    async def __call__(self, request: ModelRequest) -> ModelResponse:
        async for event in self.model.stream(request):
            if isinstance(event, ModelResponse):
                return event
        raise AssertionError("the model gave no response")


async def run_compact(log: Log, summariser: Summariser, **kwargs: Any) -> ContextCompacted | CompactionFailed | None:
    options: dict[str, Any] = {"keep_tokens": 3000, "trigger": "manual", "run_id": None} | kwargs
    return await compact(log.events, call_model=summariser, session_id=SESSION, **options)


# --- planning --------------------------------------------------------------------------------------


def test_plan_keeps_the_recent_turns_and_replaces_the_rest() -> None:
    log = long_session()
    plan = plan_compaction(log.events, keep_tokens=3000)
    assert plan is not None and plan.previous is None
    kept_event = log.events[plan.kept_from_seq]
    assert isinstance(kept_event, AssistantMessage)
    assert plan.tokens_kept <= 3000
    assert plan.dropped_to_seq == plan.kept_from_seq - 1
    # Every task the user gave in the dropped part is carried, in order.
    assert plan.instructions[0] == "Task 0: read file0.txt and report its size."
    assert len(plan.instructions) == len(set(plan.instructions)) == plan.dropped_tool_calls
    assert plan.tokens_dropped + plan.tokens_kept == estimate_messages(rebuild_history(log.events))


def test_plan_cuts_at_the_last_assistant_message_when_nothing_fits() -> None:
    log = long_session(turns=3)
    plan = plan_compaction(log.events, keep_tokens=0)
    assert plan is not None
    assert plan.kept_from_seq == assistant_seq(log, -1)


def test_nothing_to_compact_when_everything_fits() -> None:
    log = long_session(turns=2)
    assert plan_compaction(log.events, keep_tokens=10**9) is None
    assert plan_compaction(Log().events, keep_tokens=0) is None


def test_a_cut_never_separates_a_tool_call_from_its_result() -> None:
    log = long_session(turns=6, result_chars=1500)
    total = estimate_messages(rebuild_history(log.events))
    for keep_tokens in range(0, total + 200, 97):
        plan = plan_compaction(log.events, keep_tokens=keep_tokens)
        if plan is None:
            continue
        events: list[Event] = [*log.events]
        compacted = ContextCompacted(
            session_id=SESSION,
            trigger="auto",
            summary="s",
            kept_from_seq=plan.kept_from_seq,
            dropped_from_seq=plan.dropped_from_seq,
            dropped_to_seq=plan.dropped_to_seq,
            dropped_messages=plan.dropped_messages,
            dropped_tool_calls=plan.dropped_tool_calls,
            tokens_before=0,
            tokens_after=0,
            seq=len(events),
        )
        events.append(compacted)
        history = rebuild_history(events)
        assert_well_formed(history)
        calls = {u.id for m in history for u in m.tool_uses}
        results = [b.tool_use_id for m in history for b in m.content if isinstance(b, ToolResultBlock)]
        assert set(results) <= calls, keep_tokens
        # and a second compaction over that one keeps the same guarantee
        second = plan_compaction(events, keep_tokens=keep_tokens // 2)
        if second is not None:
            later = [*events, compacted.model_copy(update={"seq": len(events), "kept_from_seq": second.kept_from_seq})]
            assert_well_formed(rebuild_history(later))


# --- the summary request and its checks -----------------------------------------------------------


def test_summary_request_asks_for_the_sections_with_instructions_and_focus() -> None:
    log = long_session(turns=4, result_chars=10_000)
    plan = plan_compaction(log.events, keep_tokens=1000)
    assert plan is not None
    request = summary_request(plan, focus="the file sizes", problem="missing sections: Decisions")
    assert not request.tools and len(request.messages) == 1
    prompt = request.messages[0].text
    assert "summary" in request.system.lower() and "replace" in request.system.lower()
    for instruction in plan.instructions:
        assert instruction in prompt
    for name in SECTIONS:
        assert f"## {name}" in prompt
    assert prompt.index("## Goal and constraints") < prompt.index("## Next step")
    assert "Give most room to: the file sizes" in prompt
    assert "missing sections: Decisions" in prompt
    # Long tool results are shortened, so the request stays bounded.
    assert "x" * 10_000 not in prompt and "more characters not shown" in prompt
    assert len(prompt) < 4 * 2500 + 4000


def test_check_summary_accepts_a_good_summary() -> None:
    plan = plan_compaction(long_session().events, keep_tokens=3000)
    assert plan is not None
    assert check_summary(good_summary(plan), plan) is None
    # headings in any case, with stray spaces, and instructions rewrapped still count
    loose = (
        good_summary(plan).replace("## Decisions", "  ##  DECISIONS  ").replace("read file0.txt", "read\n  file0.txt")
    )
    assert check_summary(loose, plan) is None


def test_check_summary_names_a_missing_section() -> None:
    plan = plan_compaction(long_session().events, keep_tokens=3000)
    assert plan is not None
    problem = check_summary(good_summary(plan).replace("## Open items", "Open items:"), plan)
    assert problem is not None and "Open items" in problem and "Decisions" not in problem


def test_check_summary_names_a_dropped_instruction() -> None:
    plan = plan_compaction(long_session().events, keep_tokens=3000)
    assert plan is not None
    paraphrased = good_summary(plan).replace("Task 1: read file1.txt", "Task 1: look at file1.txt")
    problem = check_summary(paraphrased, plan)
    assert problem is not None and "verbatim" in problem and "Task 1: read file1.txt" in problem


def test_check_summary_rejects_a_summary_longer_than_its_input() -> None:
    plan = plan_compaction(long_session().events, keep_tokens=3000)
    assert plan is not None
    problem = check_summary(good_summary(plan, filler="y" * (4 * plan.tokens_dropped)), plan)
    assert problem is not None and "not shorter" in problem and str(plan.tokens_dropped) in problem


# --- compacting ------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_compact_records_a_checked_summary_that_shrinks_the_context() -> None:
    log = long_session()
    plan = plan_compaction(log.events, keep_tokens=3000)
    assert plan is not None
    summariser = Summariser(lambda _: good_summary(plan))

    event = record(log, await run_compact(log, summariser, overhead_tokens=500, focus="sizes", run_id="r9"))

    assert len(summariser.requests) == 1 and event.attempts == 1
    assert event.summary == good_summary(plan) and event.instructions == plan.instructions
    assert (event.kept_from_seq, event.dropped_tool_calls, event.focus, event.run_id) == (
        plan.kept_from_seq,
        plan.dropped_tool_calls,
        "sizes",
        "r9",
    )
    history = rebuild_history(log.events)
    assert history[0].text == summary_text(event)
    assert event.tokens_before == 500 + plan.tokens_dropped + plan.tokens_kept
    assert event.tokens_after == 500 + estimate_messages(history) < event.tokens_before
    assert_well_formed(history)


@pytest.mark.anyio
async def test_a_second_compaction_summarises_the_first_and_carries_its_instructions() -> None:
    log = long_session()
    first_plan = plan_compaction(log.events, keep_tokens=3000)
    assert first_plan is not None
    first = record(log, await run_compact(log, Summariser(lambda _: good_summary(first_plan))))
    for _ in range(4):
        log.turn(result_chars=4000)

    plan = plan_compaction(log.events, keep_tokens=3000)
    assert plan is not None and plan.previous == first
    assert plan.dropped[0].text.startswith(summary_text(first))
    assert plan.instructions[: len(first.instructions)] == first.instructions
    assert "Task 8: read file8.txt and report its size." in plan.instructions
    assert plan.dropped_from_seq == first.dropped_from_seq
    summariser = Summariser(lambda _: good_summary(plan))
    request_text = summary_request(plan).messages[0].text
    assert first.summary in request_text and "summary of the conversation before this" in request_text

    second = record(log, await run_compact(log, summariser))

    history = rebuild_history(log.events)
    assert history[0].text == summary_text(second)
    assert all(i in second.summary for i in first.instructions)
    assert_well_formed(history)


@pytest.mark.anyio
async def test_compact_retries_once_with_the_problem_then_succeeds() -> None:
    log = long_session()
    plan = plan_compaction(log.events, keep_tokens=3000)
    assert plan is not None
    answers = iter(["Here is a summary without any sections.", good_summary(plan)])
    summariser = Summariser(lambda _: next(answers))

    event = await run_compact(log, summariser)

    assert isinstance(event, ContextCompacted) and event.attempts == 2
    assert len(summariser.requests) == 2
    retry = summariser.requests[1].messages[0].text
    assert "rejected" in retry and "Goal and constraints" in retry.split("rejected", 1)[1]


@pytest.mark.anyio
async def test_compact_gives_up_after_two_failed_checks_and_keeps_the_history() -> None:
    log = long_session()
    summariser = Summariser(lambda _: "## Goal and constraints\nDo stuff.")

    event = await run_compact(log, summariser, trigger="auto")

    assert isinstance(event, CompactionFailed)
    assert len(summariser.requests) == 2 and event.attempts == 2 and event.trigger == "auto"
    assert "Decisions" in event.reason and "verbatim" in event.reason and "kept" in event.reason
    assert event.tokens == estimate_messages(rebuild_history(log.events))


@pytest.mark.anyio
async def test_a_model_error_fails_the_compaction_and_keeps_the_history() -> None:
    log = long_session()
    summariser = Summariser(lambda _: {"error": "permanent:model overloaded"})

    event = await run_compact(log, summariser)

    assert isinstance(event, CompactionFailed) and event.attempts == 1 and len(summariser.requests) == 1
    assert "model overloaded" in event.reason and "kept" in event.reason


@pytest.mark.anyio
async def test_cancellation_is_not_reported_as_a_failed_compaction() -> None:
    log = long_session()
    summariser = Summariser(lambda _: {"text": "late", "delay_s": 10})
    with anyio.move_on_after(0.05) as scope:
        await run_compact(log, summariser)
    assert scope.cancelled_caught


@pytest.mark.anyio
async def test_compact_does_nothing_when_there_is_nothing_to_compact() -> None:
    summariser = Summariser(lambda _: "unused")
    assert await run_compact(long_session(turns=1), summariser, keep_tokens=10**9) is None
    assert summariser.requests == []


def test_preview_estimates_the_saving_without_a_model() -> None:
    log = long_session(turns=10)
    preview = preview_compaction(log.events, keep_tokens=3000, overhead_tokens=800)
    plan = plan_compaction(log.events, keep_tokens=3000)
    assert preview is not None and plan is not None
    assert preview.tokens_before == 800 + estimate_messages(rebuild_history(log.events))
    assert preview.tokens_after < preview.tokens_before
    assert preview.tokens_after >= 800 + plan.tokens_kept + sum(len(i) // 4 for i in plan.instructions)
    assert (preview.dropped_messages, preview.dropped_tool_calls, preview.tokens_kept, preview.tokens_dropped) == (
        plan.dropped_messages,
        plan.dropped_tool_calls,
        plan.tokens_kept,
        plan.tokens_dropped,
    )
    assert preview_compaction(log.events, keep_tokens=10**9) is None


@pytest.mark.anyio
async def test_a_summary_cut_off_at_the_output_limit_is_retried_with_that_said() -> None:
    log = long_session()
    requests: list[ModelRequest] = []

    async def call_model(request: ModelRequest) -> ModelResponse:
        requests.append(request)
        return ModelResponse(
            Message(role="assistant", content=[TextBlock(text="## Goal and constraints\n")]), "max_tokens"
        )

    event = await compact(
        log.events, call_model=call_model, session_id=SESSION, run_id=None, trigger="auto", keep_tokens=3000
    )
    assert isinstance(event, CompactionFailed) and len(requests) == 2
    assert "cut off at the output limit of 4096 tokens" in requests[1].messages[0].text


def test_instructions_with_quotes_and_lines_are_shown_as_written() -> None:
    log = long_session(turns=2)
    log.user('Use "tabs", not spaces.\nNever push to main.')
    log.assistant("Understood.")
    log.turn(result_chars=4000)
    plan = plan_compaction(log.events, keep_tokens=0)
    assert plan is not None and 'Use "tabs", not spaces.\nNever push to main.' in plan.instructions
    assert 'Use "tabs", not spaces.\nNever push to main.' in summary_request(plan).messages[0].text
    assert check_summary(good_summary(plan), plan) is None


def test_a_long_pasted_message_is_material_to_summarise_not_an_instruction_to_quote() -> None:
    from orchestrator.context.compaction import MAX_INSTRUCTION_CHARS

    log = Log()
    pasted = "Here is the log:\n" + "2026-11-29 build step ok\n" * 200
    assert len(pasted) > MAX_INSTRUCTION_CHARS
    log.user(pasted)
    log.assistant("Reading it.")
    log.user("Never touch the CI config.")
    log.assistant("Understood.")
    log.turn(result_chars=4000)
    plan = plan_compaction(log.events, keep_tokens=500)
    assert plan is not None
    assert plan.instructions[0] == "Never touch the CI config."
    assert pasted not in plan.instructions
    assert "Here is the log:" in summary_request(plan).messages[0].text  # still there for the summary to describe


def test_a_run_killed_after_a_compaction_resumes_from_the_summary() -> None:
    from orchestrator.loop.resume import find_resume_point

    log = long_session(turns=4)
    log.add(RunStarted(session_id=SESSION, run_id="live", model="scripted:test", max_steps=10))
    log.user("Task live: read big.txt.", run_id="live")
    log.assistant("Reading.", ("c_live", "fs__read", {"path": "big.txt"}), run_id="live")
    last = log.events[-1].seq
    log.add(ToolCallStarted(session_id=SESSION, run_id="live", step=1, call_id="c_live", tool="fs__read", arguments={}))
    log.result("c_live", "big " * 1000, run_id="live")
    assert last is not None
    log.compacted(last)  # recorded before the next model call, which the kill prevented

    point = find_resume_point(log.events, "live")
    assert point.history[0].role == "user" and "compacted" in point.history[0].text
    assert len(point.history) == 2 and point.history[1].tool_uses[0].id == "c_live"  # open tail: its result is reused
    assert "c_live" in point.finished
