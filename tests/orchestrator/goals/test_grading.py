"""The grader's verdict is read strictly: one entry per criterion by number, a boolean and a reason each."""

from __future__ import annotations

import json

import pytest

from orchestrator.events import Event, RunFinished, ToolCallFinished, ToolCallStarted
from orchestrator.goals.grading import VerdictError, gather, grader_brief, parse_verdict, work_brief

CRITERIA = ["a.txt exists", "tests pass"]


def answer(*entries: object) -> str:
    return json.dumps({"criteria": list(entries)})


def test_a_verdict_is_read_in_the_criteria_order_from_json_a_fence_or_after_a_line_of_prose() -> None:
    text = answer({"id": 2, "passed": False, "reason": "2 failed"}, {"id": 1, "passed": True, "reason": "there"})
    for shaped in (text, f"Checked.\n```json\n{text}\n```", f"I read the files.\n{text}"):
        verdicts = parse_verdict(shaped, CRITERIA)
        assert [(v.criterion, v.passed, v.reason) for v in verdicts] == [
            ("a.txt exists", True, "there"),
            ("tests pass", False, "2 failed"),
        ]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("looks good to me", "it is not JSON"),
        ('{"criteria": [', "its JSON is not valid"),
        ('{"verdict": "pass"}', "it has no 'criteria' list"),
        (answer({"id": 1, "passed": True, "reason": "ok"}), "criteria 2 have no verdict"),
        (
            answer({"id": 1, "passed": "yes", "reason": "ok"}, {"id": 2, "passed": True, "reason": "ok"}),
            "true or false",
        ),
        (answer({"id": 1, "passed": True, "reason": " "}, {"id": 2, "passed": True, "reason": "ok"}), "give a reason"),
        (answer({"id": 3, "passed": True, "reason": "ok"}), "id must be a criterion's number, 1 to 2"),
        (answer({"id": True, "passed": True, "reason": "ok"}), "id must be a criterion's number"),
        (
            answer(*[{"id": 1, "passed": True, "reason": "ok"}] * 2, {"id": 2, "passed": True, "reason": "ok"}),
            "criterion 1 is judged twice",
        ),
        ("[" * 100_000, "it is not JSON"),
        ("{" + " " * 300_000 + "}", "characters long"),
    ],
)
def test_an_unusable_verdict_is_an_error_saying_what_is_wrong_never_a_pass(text: str, says: str) -> None:
    with pytest.raises(VerdictError, match=says):
        parse_verdict(text, CRITERIA)


def test_a_hostile_reason_is_bounded_and_stripped_of_control_characters() -> None:
    reason = "\x1b[31mred\x00" + "x" * 10_000
    verdicts = parse_verdict(
        answer({"id": 1, "passed": False, "reason": reason}, {"id": 2, "passed": True, "reason": "ok"}), CRITERIA
    )
    assert verdicts[0].reason.startswith("[31mred") and len(verdicts[0].reason) == 1000
    assert "\x1b" not in verdicts[0].reason and "\x00" not in verdicts[0].reason


def test_the_evidence_holds_the_files_the_commands_with_clipped_output_and_the_answer() -> None:
    ids = {"session_id": "s", "run_id": "r", "step": 1}
    events: list[Event] = [
        ToolCallStarted(**ids, call_id="1", tool="fs__write", arguments={"path": "a.txt", "content": "x"}),
        ToolCallStarted(**ids, call_id="2", tool="shell__run", arguments={"command": "pytest -q"}),
        ToolCallFinished(
            **ids, call_id="2", tool="shell__run", is_error=True, content="E" * 5000 + "3 failed", duration_ms=1
        ),
        RunFinished(session_id="s", run_id="r", status="completed", reason="end_turn", final_text="Done.", steps=4),
    ]
    evidence = gather(events)
    assert evidence.files == ["a.txt"] and evidence.steps == 4 and evidence.final_text == "Done."
    brief = grader_brief("ship", CRITERIA, evidence, work_session_id="s_1")
    assert "- a.txt" in brief and "$ pytest -q\n(it failed)" in brief and brief.count("E") < 2000
    assert "3 failed" in brief and "characters not shown" in brief and "1. a.txt exists\n2. tests pass" in brief
    assert "Done." in brief and '"id": 1' in brief


def test_a_work_brief_carries_the_findings_only_after_a_failed_verdict() -> None:
    first = work_brief("ship", CRITERIA, attempt=1)
    again = work_brief("ship", CRITERIA, attempt=2, findings="- tests pass: 2 failed")
    assert "ship" in first and "2. tests pass" in first and "findings" not in first
    assert "This is session 2" in again and "- tests pass: 2 failed" in again
