"""Reading ``/goal GOAL --accept "criterion" ... [--budget sessions=N,steps=N,tokens=N,time=D]``.

Pure logic, no widgets: :mod:`clients.tui.long_work_commands` carries the command out. The line is split as a
shell would (quotes keep a criterion's words together); the goal is the words before the first ``--accept`` or
``--budget`` (so a goal may mention ``--json``). A mistake
gets an error in the user's terms, naming what to type instead.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

__all__ = ["BUDGET_KEYS", "GoalArgs", "GoalArgsError", "parse_duration", "parse_goal"]

BUDGET_KEYS = ("sessions", "steps", "tokens", "time")
USAGE = '/goal GOAL --accept "criterion" [--accept ...] [--budget sessions=N,steps=N,tokens=N,time=30m]'

_DURATION = re.compile(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")


class GoalArgsError(ValueError):
    """The line is not a goal the command can start; the message says what to type."""


@dataclass(frozen=True)
class GoalArgs:
    """A goal as typed: its text, its acceptance criteria and its budget (the face's ``GoalBudget`` fields)."""

    goal: str
    criteria: list[str]
    budget: dict[str, float | int] = field(default_factory=dict[str, float | int])


def parse_duration(text: str) -> float:
    """``90`` / ``90s`` / ``30m`` / ``2h`` / ``1h30m`` as seconds.

    Raises:
        GoalArgsError: not a duration, or zero.
    """
    if text.isdigit():
        seconds = float(text)
    else:
        found = _DURATION.fullmatch(text)
        if found is None or not any(found.groups()):
            raise GoalArgsError(f"time={text!r} is not a duration; write it as 90s, 30m, 2h or 1h30m")
        hours, minutes, secs = (int(g or 0) for g in found.groups())
        seconds = float(hours * 3600 + minutes * 60 + secs)
    if seconds <= 0:
        raise GoalArgsError("time= must be more than zero")
    return seconds


def parse_goal(args: str) -> GoalArgs:
    """The goal ``args`` (the line after ``/goal``) asks for.

    Raises:
        GoalArgsError: no goal, no criterion, an unknown option or a budget that cannot be read.
    """
    try:
        words = shlex.split(args)
    except ValueError as exc:
        raise GoalArgsError(f"{exc} (close the quote); usage: {USAGE}") from None
    goal: list[str] = []
    criteria: list[str] = []
    budget: dict[str, float | int] = {}
    at = 0
    while at < len(words):
        word = words[at]
        name, eq, inline = word.partition("=")
        if name in ("--accept", "--budget"):
            value = inline if eq else (words[at + 1] if at + 1 < len(words) else "")
            at += 1 if eq else 2
            if not value.strip():
                raise GoalArgsError(f"{name} needs a value; usage: {USAGE}")
            if name == "--accept":
                criteria.append(value.strip())
            else:
                budget.update(_budget(value))
        elif (criteria or budget) and word.startswith("--"):  # before the options, a goal may say "--json"
            raise GoalArgsError(f"unknown option {word}; usage: {USAGE}")
        elif criteria or budget:
            raise GoalArgsError(f"{word!r} comes after the options: put the goal first, then --accept; usage: {USAGE}")
        else:
            goal.append(word)
            at += 1
    if not goal:
        raise GoalArgsError(f"say what the goal is; usage: {USAGE}")
    if not criteria:
        raise GoalArgsError(f'give at least one --accept "criterion" the grader can check; usage: {USAGE}')
    return GoalArgs(" ".join(goal), criteria, budget)


def _budget(text: str) -> dict[str, float | int]:
    found: dict[str, float | int] = {}
    for part in (p.strip() for p in text.split(",")):
        key, eq, value = part.partition("=")
        if not eq or key not in BUDGET_KEYS:
            raise GoalArgsError(f"--budget takes {', '.join(k + '=…' for k in BUDGET_KEYS)}; not {part!r}")
        if key == "time":
            found["time_s"] = parse_duration(value)
        elif not value.isdigit() or int(value) <= 0:
            raise GoalArgsError(f"{key}={value!r}: give a whole number more than zero")
        else:
            found[key] = int(value)
    return found
