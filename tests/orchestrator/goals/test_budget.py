"""A goal's budget as a person writes it, and what is left of it."""

from __future__ import annotations

import pytest

from orchestrator.events_long import GoalBudget, GoalSpent
from orchestrator.goals.budget import (
    BudgetError,
    format_budget,
    parse_budget,
    parse_duration,
    session_steps,
    spent_reason,
    with_defaults,
)


def test_a_budget_reads_every_measure_in_any_order() -> None:
    assert parse_budget("time=30m, sessions=3,tokens=50000,steps=200") == GoalBudget(
        sessions=3, steps=200, tokens=50_000, time_s=1800.0
    )
    assert parse_budget("") == GoalBudget()
    assert [parse_duration(d) for d in ("90s", "90", "2h", "1.5h", "1d")] == [90, 90, 7200, 5400, 86400]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("sessions=0", "sessions='0' must be a whole number of at least 1"),
        ("sessions=-1", "must be a whole number"),
        ("steps=ten", "steps='ten' must be a whole number"),
        ("time=soon", "time='soon' is not a duration; write it like 90s, 30m, 2h or 1d"),
        ("time=0m", "must be more than zero"),
        ("money=5", "'money=5' is not part of a budget"),
        ("sessions", "'sessions' is not part of a budget"),
        ("sessions=1,sessions=2", "sessions is given twice"),
    ],
)
def test_a_bad_budget_says_what_to_write(text: str, says: str) -> None:
    with pytest.raises(BudgetError, match=says.replace("(", r"\(").replace(")", r"\)")):
        parse_budget(text)


def test_the_budget_is_spent_on_any_measure_and_the_steps_left_bound_the_next_session() -> None:
    budget = with_defaults(GoalBudget(steps=100, tokens=1000, time_s=60))
    assert budget.sessions == 5
    assert spent_reason(budget, GoalSpent(sessions=4, steps=99, tokens=999, time_s=59)) == ""
    assert "5 sessions is spent" in spent_reason(budget, GoalSpent(sessions=5))
    assert "100 steps is spent" in spent_reason(budget, GoalSpent(steps=100))
    assert "1,000 tokens is spent" in spent_reason(budget, GoalSpent(tokens=1200))
    assert "time budget of 1m is spent" in spent_reason(budget, GoalSpent(time_s=61))
    assert session_steps(budget, GoalSpent(steps=70)) == 30
    assert (
        format_budget(budget, GoalSpent(sessions=2, steps=70))
        == "sessions 2/5, steps 70/100, tokens 0/1,000, time 0s/1m"
    )
