"""What a parent is told about a child's run: the summary and progress made from the child's own events."""

from __future__ import annotations

import os
import time
from pathlib import Path

from orchestrator.events import (
    AssistantMessage,
    Event,
    RunFinished,
    RunQueued,
    RunStarted,
    ToolCallFinished,
    ToolCallStarted,
)
from orchestrator.messages import Message, TextBlock, Usage
from servers.subagents import child_state, open_questions, summarize
from servers.subagents._summary import MAX_ANSWER_CHARS, MAX_ITEMS

RUN = "r_child"
S = "s_child"


def started(call_id: str, tool: str, ts: float = 0.0, run_id: str = RUN, **arguments: object) -> ToolCallStarted:
    return ToolCallStarted(
        session_id=S, run_id=run_id, step=1, call_id=call_id, tool=tool, arguments=dict(arguments), ts=ts
    )


def finished(call_id: str, tool: str, *, error: bool = False, run_id: str = RUN) -> ToolCallFinished:
    return ToolCallFinished(
        session_id=S, run_id=run_id, step=1, call_id=call_id, tool=tool, is_error=error, content="", duration_ms=1
    )


def message(step: int) -> AssistantMessage:
    return AssistantMessage(
        session_id=S,
        run_id=RUN,
        step=step,
        message=Message(role="assistant", content=[TextBlock(text="...")]),
        stop_reason="tool_use",
        usage=Usage(),
        duration_ms=1,
    )


def test_files_changed_are_the_writes_edits_and_deletes_that_succeeded_in_this_run() -> None:
    events: list[Event] = [
        started("1", "fs__write", path="a.py", content="x"),
        finished("1", "fs__write"),
        started("2", "fs__edit", path="b.py", old="x", new="y"),
        finished("2", "fs__edit", error=True),  # refused: nothing changed
        started("3", "fs__read", path="c.py"),
        finished("3", "fs__read"),
        started("4", "fs__edit", path="a.py", old="x", new="y"),
        finished("4", "fs__edit"),
        started("5", "fs__delete", path="old.txt"),
        finished("5", "fs__delete"),
        started("6", "fs__write", run_id="r_other", path="other.py", content=""),
        finished("6", "fs__write", run_id="r_other"),
        started("7", "fs__write", path="never_finished.py", content=""),
    ]
    summary = summarize(events, RUN, "")
    assert summary.files_changed == ["a.py", "old.txt"]


def test_commands_run_are_listed_in_order_and_failures_say_so() -> None:
    events: list[Event] = [
        started("1", "shell__run", command="pytest -q"),
        finished("1", "shell__run", error=True),
        started("2", "shell__run", command="git status"),
        finished("2", "shell__run"),
    ]
    assert summarize(events, RUN, "").commands_run == ["pytest -q (failed)", "git status"]


def test_lists_are_bounded_for_the_parents_context() -> None:
    events: list[Event] = []
    for i in range(100):
        events += [started(str(i), "shell__run", command=f"echo {i} " + "x" * 1000), finished(str(i), "shell__run")]
    commands = summarize(events, RUN, "").commands_run
    assert len(commands) == MAX_ITEMS
    assert commands[-1] == f"... and {100 - MAX_ITEMS + 1} more"
    assert all(len(c) <= 300 for c in commands)


def test_open_questions_are_lines_ending_in_a_question_mark_and_items_under_the_heading() -> None:
    text = """Done: the parser handles tabs now.

Should the CLI accept tabs too?

## Open questions
- whether to keep the old flag
- 2. the Windows path case

## Next
Nothing else to do.
"""
    assert open_questions(text) == [
        "Should the CLI accept tabs too?",
        "whether to keep the old flag",
        "2. the Windows path case",
    ]


def test_an_open_questions_section_ends_at_a_blank_line_and_none_is_no_question() -> None:
    text = "**Open questions:**\n- None.\n\nOpen questions:\n1. the cache size\n\nThat is all.\n"
    assert open_questions(text) == ["the cache size"]
    assert open_questions("All done. Tests pass.") == []


def test_a_failed_run_past_its_deadline_is_timed_out_with_its_reason() -> None:
    events: list[Event] = [
        RunQueued(session_id=S, run_id=RUN, text="goal", max_steps=5, ts=100.0),
        RunFinished(
            session_id=S, run_id=RUN, status="failed", reason="timed out after 2 s", final_text="", steps=1, ts=102.5
        ),
    ]
    state = child_state(S, RUN, events, status="failed", reason="timed out after 2 s")
    assert (state.status, state.finished, state.elapsed_s) == ("timed_out", True, 2.5)
    assert state.reason.startswith("timed out")
    plain = child_state(S, RUN, events, status="failed", reason="model error: boom")
    assert plain.status == "failed"


def test_progress_of_a_running_child_shows_steps_the_tool_it_is_in_and_elapsed() -> None:
    events: list[Event] = [
        RunStarted(session_id=S, run_id=RUN, model="m", max_steps=5, ts=10.0),
        message(1),
        started("1", "fs__read", path="a"),
        finished("1", "fs__read"),
        message(2),
        started("2", "shell__run", command="make"),
    ]
    state = child_state(S, RUN, events, status="running", now=14.0)
    assert (state.finished, state.steps, state.current_tool, state.elapsed_s) == (False, 2, "shell__run", 4.0)
    assert state.summary is None and state.final_text == ""


def test_a_finished_child_carries_its_answer_cut_to_a_bound_and_its_summary() -> None:
    answer = "y" * (MAX_ANSWER_CHARS + 500) + "\nIs this enough?"
    events: list[Event] = [
        RunStarted(session_id=S, run_id=RUN, model="m", max_steps=5, ts=1.0),
        RunFinished(session_id=S, run_id=RUN, status="completed", reason="", final_text=answer, steps=3, ts=2.0),
    ]
    state = child_state(S, RUN, events, status="completed", final_text=answer)
    assert state.finished and state.steps == 3
    assert len(state.final_text) < MAX_ANSWER_CHARS + 100
    assert state.final_text.endswith(f"[cut at {MAX_ANSWER_CHARS:,} of {len(answer):,} characters]")
    assert state.summary is not None and state.summary.open_questions == ["Is this enough?"]  # from all of it
    shared = child_state(S, RUN, events, status="completed", final_text=answer, answer_chars=2000)
    assert len(shared.final_text) < 2100 and f"result({S}) gives up to" in shared.final_text


def test_a_refusal_inside_a_task_group_is_still_told_as_the_refusal() -> None:
    # A wait watches its children in a task group: a face refusal there comes out wrapped, and must reach the
    # model as the face's words, not as a broken connection.
    from clients.loom import FaceError
    from servers.subagents._server import _refusal

    refused = FaceError("no run 'r_x'", "get_run")
    assert _refusal(ExceptionGroup("watch", [ExceptionGroup("inner", [refused])])) is refused
    assert _refusal(ExceptionGroup("watch", [refused, OSError("reset")])) is None
    assert _refusal(OSError("reset")) is None


def test_the_text_of_a_wait_for_twenty_busy_children_names_every_one_within_the_limit() -> None:
    from servers.subagents._models import WaitResult
    from servers.subagents._render import TEXT_LIMIT, render_wait
    from servers.subagents._summary import ChildState, ChildSummary

    busy = ChildSummary(
        files_changed=[f"src/module_{i}.py" for i in range(20)],
        commands_run=[f"pytest tests/test_{i}.py -q" for i in range(20)],
        open_questions=[f"should case {i} be handled too?" for i in range(20)],
    )
    finished = [
        ChildState(
            child_id=f"s_child{i:02d}",
            run_id=f"r_{i}",
            status="completed",
            finished=True,
            steps=9,
            elapsed_s=30.0,
            final_text="x" * 400,  # what 20 get of the 8,000 a wait shares
            summary=busy,
        )
        for i in range(20)
    ]
    text = render_wait(WaitResult(finished=finished, running=[], waited_s=31.0, timed_out=False))
    assert len(text) <= TEXT_LIMIT
    assert all(f"s_child{i:02d}: completed" in text for i in range(20))  # no child lost to a cut
    assert "(+19 more)" in text  # summaries listed shorter; result(child_id) has them all


def test_the_agents_listing_follows_the_definition_files_as_they_change(tmp_path: Path) -> None:
    from servers.subagents._listing import agents_listing

    home, project = tmp_path / "home", tmp_path / "project"
    (project / ".loom" / "agents").mkdir(parents=True)
    definition = project / ".loom" / "agents" / "a.md"
    assert "- tidy:" not in agents_listing(home, project)
    definition.write_text("---\nname: tidy\ndescription: Tidies imports.\n---\n")
    assert "- tidy: Tidies imports." in agents_listing(home, project)
    definition.write_text("---\nname: tidy\ndescription: Sorts imports.\n---\n")  # same size, a new content
    os.utime(definition, ns=(time.time_ns() + 10**9, time.time_ns() + 10**9))
    assert "- tidy: Sorts imports." in agents_listing(home, project)
    definition.unlink()
    assert "- tidy:" not in agents_listing(home, project)
    assert "- planner:" in agents_listing(home, None)  # the built-in roles, with no project at all
