"""The handoff's shape and checks, what it is written from, and what a fresh session's later compaction keeps."""

from __future__ import annotations

from orchestrator.context.compaction import plan_compaction
from orchestrator.context.handoff import BLOCKS, HandoffSource, check_handoff, handoff_request, handoff_source
from orchestrator.context.history import rebuild_history
from orchestrator.context.summary import SECTIONS
from orchestrator.events import AssistantMessage, ContextCompacted, Event, SessionCreated, UserMessage
from orchestrator.events_long import HandoffWritten, TodoItem, TodoUpdated
from orchestrator.messages import Message, TextBlock, Usage

FIRST = 'Keep the API stable; "v1" clients must not break.'
SECOND = "Also   write a changelog\nentry."


def numbered(events: list[Event]) -> list[Event]:
    return [e.model_copy(update={"seq": n}) for n, e in enumerate(events, 1)]


def said(session: str, role: str, text: str) -> Event:
    if role == "user":
        return UserMessage(session_id=session, run_id="r", text=text)
    message = Message(role="assistant", content=[TextBlock(text=text)])
    return AssistantMessage(
        session_id=session, run_id="r", step=1, message=message, stop_reason="end_turn", usage=Usage(), duration_ms=1.0
    )


def good(instructions: list[str]) -> str:
    blocks = dict.fromkeys(BLOCKS, "none")
    blocks["Goal and constraints"] = "\n".join(f'- "{i}"' for i in instructions)
    return "\n\n".join(f"## {name}\n{body}" for name, body in blocks.items())


def test_every_block_and_every_instruction_verbatim_or_the_check_says_what_is_wrong() -> None:
    source = HandoffSource(messages=[], has_summary=False, instructions=[FIRST, SECOND])
    assert check_handoff(good([FIRST, SECOND]), source) is None
    # Whitespace runs aside, an instruction must be there word for word.
    assert check_handoff(good([FIRST, "Also write a changelog entry."]), source) is None
    reworded = check_handoff(good([FIRST, "Also write a change log entry."]), source)
    assert reworded is not None and "not quoted verbatim (1)" in reworded and "changelog" in reworded
    missing = check_handoff(good([FIRST, SECOND]).replace("## Warnings", "## Caveats"), source)
    assert missing == 'missing sections: "## Warnings"'
    # A compaction summary's sections are not a handoff: the state of systems and the warnings are missing.
    as_summary = "\n\n".join(f'## {name}\n- "{FIRST}" {SECOND}' for name in SECTIONS)
    found = check_handoff(as_summary, source)
    assert found is not None and '"## State of files and systems"' in found and '"## Warnings"' in found
    too_long = check_handoff(good([FIRST, SECOND]) + "\nword" * 9000, source)
    assert too_long is not None and "is longer than" in too_long


def test_the_source_carries_a_compactions_and_an_earlier_handoffs_instructions_and_the_latest_plan() -> None:
    events = numbered(
        [
            SessionCreated(session_id="s2", cwd="/w", model="m", handoff_from="s1"),
            HandoffWritten(
                session_id="s2", to_session_id="s2", from_session_id="s1", text="h", instructions=[FIRST], extra=SECOND
            ),
            said("s2", "user", "first message of the fresh session"),
            said("s2", "assistant", "ok"),
            TodoUpdated(session_id="s2", items=[TodoItem(text="old plan")]),
            TodoUpdated(session_id="s2", items=[TodoItem(text="step one", status="completed"), TodoItem(text="two")]),
            said("s2", "user", "x" * 3000),  # material, not an instruction
        ]
    )
    source = handoff_source(events)
    assert source.instructions == [FIRST, SECOND, "first message of the fresh session"]
    assert [i.text for i in source.plan] == ["step one", "two"]
    asked = handoff_request(source, extra="be brief").messages[0].text
    assert f"<instruction>\n{FIRST}\n</instruction>" in asked and "## Warnings" in asked and "be brief" in asked
    assert "1. [x] step one" in asked


def test_a_fresh_sessions_compaction_still_quotes_what_its_handoff_carried() -> None:
    opening: list[Event] = [
        SessionCreated(session_id="s2", cwd="/w", model="m", handoff_from="s1"),
        HandoffWritten(
            session_id="s2",
            to_session_id="s2",
            from_session_id="s1",
            text="the handoff",
            instructions=[FIRST],
            extra=SECOND,
        ),  # fmt: skip
    ]
    talk = [said("s2", role, f"{role} turn {i} " + "words " * 200) for i in range(3) for role in ("user", "assistant")]
    events = numbered([*opening, *talk])
    history = rebuild_history(events)
    assert history[0].role == "user" and "handoff of session s1" in history[0].text and FIRST in history[0].text
    plan = plan_compaction(events, keep_tokens=10)
    assert plan is not None and plan.instructions[:2] == [FIRST, SECOND]
    compacted = ContextCompacted(
        session_id="s2", trigger="manual", summary="s", instructions=plan.instructions,
        kept_from_seq=plan.kept_from_seq, dropped_from_seq=1, dropped_to_seq=plan.dropped_to_seq, dropped_messages=1,
        dropped_tool_calls=0, tokens_before=1, tokens_after=1,
    )  # fmt: skip
    later = handoff_source(numbered([*events, compacted]))
    assert later.instructions[:2] == [FIRST, SECOND] and later.has_summary
