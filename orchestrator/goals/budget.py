"""A goal's budget: reading ``sessions=N,steps=N,tokens=N,time=D``, and what is left of it before each session.

The budget is checked before each work session (:func:`spent_reason`): a goal whose sessions, steps, tokens or time
are spent ends ``failed``. The steps left bound the next work session's run (:func:`session_steps`), and the time
left its deadline (:func:`session_timeout`). What counts: ``sessions`` are work sessions started; ``steps`` the work
sessions' model steps; ``tokens`` the tokens every work and grader model call reported; ``time`` the wall time of
the attempts (from a work session's start to its verdict), so time the process was down does not count.
"""

from __future__ import annotations

import re

from orchestrator.events_long import GoalBudget, GoalSpent

__all__ = [
    "DEFAULT_SESSIONS",
    "DEFAULT_SESSION_STEPS",
    "DEFAULT_SESSION_TIMEOUT_S",
    "BudgetError",
    "check_budget",
    "format_budget",
    "parse_budget",
    "parse_duration",
    "session_steps",
    "session_timeout",
    "spent_reason",
    "with_defaults",
]

DEFAULT_SESSIONS = 5
"""Work sessions a goal may use when its budget names none: a grader that never passes must not loop forever."""
DEFAULT_SESSION_STEPS = 100
"""A work session's steps when the budget has no ``steps``."""
MAX_SESSION_STEPS = 1000
"""The face's bound on one run's steps."""
DEFAULT_SESSION_TIMEOUT_S = 6 * 3600.0
"""A work session's run deadline when the budget has no ``time``."""
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd]?)")
_KEYS = ("sessions", "steps", "tokens", "time")


class BudgetError(ValueError):
    """A budget that cannot be used; the message says what to write instead."""


def parse_duration(text: str) -> float:
    """Seconds in ``30m``, ``2h``, ``90s``, ``1.5h``, ``1d`` or a bare number of seconds.

    Raises:
        BudgetError: Not a duration, or not more than zero.
    """
    match = _DURATION.fullmatch(text.strip().lower())
    if match is None:
        raise BudgetError(f"time={text!r} is not a duration; write it like 90s, 30m, 2h or 1d")
    seconds = float(match.group(1)) * _UNITS[match.group(2) or "s"]
    if seconds <= 0:
        raise BudgetError(f"time={text!r} must be more than zero")
    return seconds


def parse_budget(text: str) -> GoalBudget:
    """The budget in ``sessions=N,steps=N,tokens=N,time=D`` (any of them, in any order; empty: none).

    Raises:
        BudgetError: An unknown key, a repeated one, or a value that is not a positive whole number (a duration
            for ``time``); the message names it.
    """
    values: dict[str, float | int] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        key, sep, value = part.partition("=")
        key, value = key.strip().lower(), value.strip()
        if not sep or key not in _KEYS:
            raise BudgetError(f"{part!r} is not part of a budget; use sessions=N, steps=N, tokens=N or time=D")
        if key in values:
            raise BudgetError(f"{key} is given twice in the budget")
        if key == "time":
            values["time_s"] = parse_duration(value)
            continue
        if not value.isdigit() or int(value) < 1:
            raise BudgetError(f"{key}={value!r} must be a whole number of at least 1")
        values[key] = int(value)
    return GoalBudget.model_validate(values)


def check_budget(budget: GoalBudget) -> GoalBudget:
    """``budget`` if every limit it sets is positive.

    Raises:
        BudgetError: A limit is zero or negative.
    """
    for name in ("sessions", "steps", "tokens", "time_s"):
        value = getattr(budget, name)
        if value is not None and value <= 0:
            raise BudgetError(f"the budget's {name} must be more than 0, not {value}")
    return budget


def with_defaults(budget: GoalBudget) -> GoalBudget:
    """``budget`` checked, with :data:`DEFAULT_SESSIONS` when it bounds nothing by sessions."""
    check_budget(budget)
    if budget.sessions is None:
        return budget.model_copy(update={"sessions": DEFAULT_SESSIONS})
    return budget


def spent_reason(budget: GoalBudget, spent: GoalSpent) -> str:
    """Why no further work session may start (``""``: one may)."""
    if budget.sessions is not None and spent.sessions >= budget.sessions:
        return f"its budget of {budget.sessions} session{'s' if budget.sessions != 1 else ''} is spent"
    if budget.steps is not None and spent.steps >= budget.steps:
        return f"its budget of {budget.steps} steps is spent ({spent.steps} used)"
    if budget.tokens is not None and spent.tokens >= budget.tokens:
        return f"its budget of {budget.tokens:,} tokens is spent ({spent.tokens:,} used)"
    if budget.time_s is not None and spent.time_s >= budget.time_s:
        return f"its time budget of {_shown_time(budget.time_s)} is spent"
    return ""


def session_steps(budget: GoalBudget, spent: GoalSpent) -> int:
    """The next work session's step bound: the steps left, else :data:`DEFAULT_SESSION_STEPS`."""
    if budget.steps is None:
        return DEFAULT_SESSION_STEPS
    return max(1, min(MAX_SESSION_STEPS, budget.steps - spent.steps))


def session_timeout(budget: GoalBudget, spent: GoalSpent) -> float:
    """The next work session's run deadline in seconds: the time left, else :data:`DEFAULT_SESSION_TIMEOUT_S`."""
    if budget.time_s is None:
        return DEFAULT_SESSION_TIMEOUT_S
    return max(1.0, budget.time_s - spent.time_s)


def _shown_time(seconds: float) -> str:
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("m", 60.0)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


def format_budget(budget: GoalBudget, spent: GoalSpent | None = None) -> str:
    """``sessions 2/5, steps 14/200, tokens 3,100, time 4m/30m``: what is spent of each limit (or the limits)."""
    spent = spent or GoalSpent()
    parts = [
        f"sessions {spent.sessions}" + (f"/{budget.sessions}" if budget.sessions is not None else ""),
        f"steps {spent.steps}" + (f"/{budget.steps}" if budget.steps is not None else ""),
        f"tokens {spent.tokens:,}" + (f"/{budget.tokens:,}" if budget.tokens is not None else ""),
        f"time {_shown_time(round(spent.time_s))}" + (f"/{_shown_time(budget.time_s)}" if budget.time_s else ""),
    ]
    return ", ".join(parts)
