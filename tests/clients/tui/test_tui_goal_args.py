"""Reading `/goal GOAL --accept "criterion" ... --budget ...`: what is started, and mistakes said in user terms."""

from __future__ import annotations

import pytest

from clients.tui.commands import Completions, candidates
from clients.tui.goal_args import GoalArgs, GoalArgsError, parse_duration, parse_goal


def test_the_goal_is_the_words_before_the_options_and_quotes_keep_a_criterion_together() -> None:
    got = parse_goal('add a --json flag --accept "the tests pass" --accept=docs --budget sessions=3,time=1h30m')
    assert got == GoalArgs("add a --json flag", ["the tests pass", "docs"], {"sessions": 3, "time_s": 5400.0})
    assert parse_goal("ship it --accept 'it runs' --budget steps=200 --budget tokens=50000").budget == {
        "steps": 200,
        "tokens": 50000,
    }


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("", "say what the goal is"),
        ("ship it", 'give at least one --accept "criterion"'),
        ("--accept 'it runs'", "say what the goal is"),
        ("ship it --accept", "--accept needs a value"),
        ("ship it --accept 'it runs", "No closing quotation (close the quote)"),
        ("ship it --accept ok --budget days=2", "--budget takes sessions=…, steps=…, tokens=…, time=…; not 'days=2'"),
        ("ship it --accept ok --budget sessions=0", "sessions='0': give a whole number more than zero"),
        ("ship it --accept ok --budget time=soon", "time='soon' is not a duration; write it as 90s, 30m, 2h or 1h30m"),
        ("ship it --accept ok --force", "unknown option --force"),
        ("ship it --acept ok", 'give at least one --accept "criterion"'),
        ("ship it --accept ok and more", "'and' comes after the options"),
    ],
)
def test_a_line_that_is_not_a_goal_says_what_to_type(line: str, said: str) -> None:
    with pytest.raises(GoalArgsError) as caught:
        parse_goal(line)
    assert said in str(caught.value)


def test_durations_read_as_seconds() -> None:
    assert [parse_duration(t) for t in ("90", "90s", "30m", "2h", "1h5m10s")] == [90, 90, 1800, 7200, 3910]
    with pytest.raises(GoalArgsError):
        parse_duration("0m")


def test_goal_and_handoff_are_offered_and_tab_completes_goal_cancel() -> None:
    known = Completions()
    assert [c.text for c in candidates("/go", known)] == ["/goal"]
    assert [c.text for c in candidates("/han", known)] == ["/handoff"]
    assert [c.text for c in candidates("/goal ca", known)] == ["/goal cancel"]
    assert candidates("/goal cache the build --accept fast", known) == []
