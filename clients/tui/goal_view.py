"""A goal in the conversation, live: its criteria as the grader last judged them, each work session, what it spent.

Built only from the goal's session's events (``goal_started``, ``goal_session_started``, ``goal_verdict``,
``goal_finished``), so a goal started by ``/goal``, by ``loom goal`` or by another agent shows the same, live or
read back. Each work session and each grader is a child of the goal's session, so each also has its own child
block below (its clock, its tool; Enter opens it). At the end the block is the goal's report: completed, or failed
or cancelled with the criteria still left.

Every text here came from a person or a model (the goal and criteria, the grader's reasons) and is cut to one
safe line before it is drawn.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from rich.text import Text
from textual.widgets import Static

from clients.long_work_lines import budget_text, criterion_line, spent_text
from clients.timeline import first_line
from clients.tui.entry import Entry
from orchestrator.events_long import (
    CriterionVerdict,
    GoalBudget,
    GoalFinished,
    GoalSessionStarted,
    GoalSpent,
    GoalStarted,
    GoalVerdict,
)

__all__ = ["GoalBlock", "GoalEvent", "GoalState", "Goals", "SessionRow"]

GoalEvent = GoalStarted | GoalSessionStarted | GoalVerdict | GoalFinished

MAX_SESSIONS = 8
"""Work sessions listed (the newest; the older are counted)."""
_OUTCOME = {"completed": "bold green", "failed": "bold red", "cancelled": "bold yellow"}


@dataclass
class SessionRow:
    """One work session toward the goal and how the grader judged it."""

    attempt: int
    session_id: str
    handoff_from: str = ""
    passed: bool | None = None
    """None while it works or is being graded."""
    failed: int = 0
    findings: str = ""


@dataclass
class GoalState:
    """A goal folded from its events; no widget (the conversation's block draws it)."""

    goal_id: str
    goal: str = ""
    criteria: list[str] = field(default_factory=list[str])
    budget: GoalBudget = field(default_factory=GoalBudget)
    spent: GoalSpent = field(default_factory=GoalSpent)
    status: str = "running"
    """``running``, then ``completed``, ``failed`` or ``cancelled``."""
    reason: str = ""
    verdicts: dict[str, CriterionVerdict] = field(default_factory=dict[str, CriterionVerdict])
    """criterion -> the grader's last judgement of it."""
    sessions: list[SessionRow] = field(default_factory=list[SessionRow])
    left: list[str] = field(default_factory=list[str])

    @property
    def ended(self) -> bool:
        """It completed, failed or was cancelled."""
        return self.status in _OUTCOME

    def apply(self, event: GoalEvent) -> None:
        """Fold one of the goal's events in."""
        if isinstance(event, GoalStarted):
            self.goal, self.criteria, self.budget = event.goal, list(event.criteria), event.budget
        elif isinstance(event, GoalSessionStarted):
            if all(r.session_id != event.child_session_id for r in self.sessions):  # a session is one row
                self.sessions.append(SessionRow(event.attempt, event.child_session_id, event.handoff_from))
            self.spent = _most(self.spent, event.spent)
        elif isinstance(event, GoalVerdict):
            row = next((r for r in self.sessions if r.session_id == event.child_session_id), None)
            row = row or next((r for r in reversed(self.sessions) if r.attempt == event.attempt), None)
            if row is None:  # shown from the middle: the session's start was not read
                row = SessionRow(event.attempt, event.child_session_id)
                self.sessions.append(row)
            row.passed, row.findings = event.passed, event.findings
            row.failed = sum(not c.passed for c in event.criteria)
            self.verdicts.update((c.criterion, c) for c in event.criteria)
            for c in event.criteria:
                if c.criterion not in self.criteria:
                    self.criteria.append(c.criterion)
            self.spent = _most(self.spent, event.spent)
        else:
            self.status, self.reason, self.left = event.status, event.reason, list(event.left)
            self.spent = _most(self.spent, event.spent)

    def summary(self) -> str:
        """``running · session 2 of 5`` (``completed``, ``failed`` or ``cancelled`` at the end)."""
        if self.ended:
            return self.status
        bound = f" of {self.budget.sessions}" if self.budget.sessions is not None else ""
        return f"running · session {len(self.sessions)}{bound}" if self.sessions else "running · starting"


def _most(known: GoalSpent, told: GoalSpent) -> GoalSpent:
    """What was spent only grows: an event that does not say (its defaults) never takes it back."""
    return GoalSpent(
        sessions=max(known.sessions, told.sessions),
        steps=max(known.steps, told.steps),
        tokens=max(known.tokens, told.tokens),
        time_s=max(known.time_s, told.time_s),
    )


class GoalBlock(Static):
    """One goal: its criteria with the last verdict on each, a line per work session, and what it spent."""

    DEFAULT_CSS = """
    GoalBlock {
        padding: 0 1;
        border-left: thick $accent;
    }
    GoalBlock.-completed {
        border-left: thick $success;
    }
    GoalBlock.-failed {
        border-left: thick $error;
    }
    GoalBlock.-cancelled {
        border-left: thick $warning;
    }
    """

    def __init__(self, goal_id: str) -> None:
        super().__init__()
        self.goal = GoalState(goal_id)
        self.update(self._content())

    @property
    def status(self) -> str:
        """``running``, then ``completed``, ``failed`` or ``cancelled``."""
        return self.goal.status

    @property
    def text(self) -> str:
        """What the block says now, as plain text."""
        return self._content().plain

    def apply(self, event: GoalEvent) -> None:
        """Fold one of the goal's events in and redraw."""
        self.goal.apply(event)
        if self.goal.ended:
            self.set_class(True, f"-{self.goal.status}")
        self.update(self._content())

    def _content(self) -> Text:
        g = self.goal
        line = Text("» goal ", style="bold")
        line.append(g.goal_id, style="bold")
        line.append(f"  [{g.summary()}]", style=_OUTCOME.get(g.status, "cyan"))
        if g.goal:
            line.append(f"\n{first_line(g.goal, 200)}", style="italic")
        for criterion in g.criteria[:20]:
            verdict = g.verdicts.get(criterion)
            if verdict is None:
                line.append(f"\n· wait  {first_line(criterion, 120)}", style="dim")
            else:
                line.append("\n" + criterion_line(verdict), style="green" if verdict.passed else "red")
        if len(g.sessions) > MAX_SESSIONS:
            line.append(f"\n… {len(g.sessions) - MAX_SESSIONS} earlier sessions", style="dim")
        for row in g.sessions[-MAX_SESSIONS:]:
            self._session_line(line, row)
        line.append(f"\nspent {spent_text(g.spent)} of {budget_text(g.budget)}", style="dim")
        if g.ended:
            style = _OUTCOME[g.status].removeprefix("bold ")
            if g.reason:
                line.append(f"\n{first_line(g.reason, 300)}", style=style)
            for item in g.left[:10]:
                line.append(f"\nleft: {first_line(item, 200)}", style=style)
        elif g.sessions:
            line.append("\n/goal cancel ends it", style="dim")
        return line

    def _session_line(self, line: Text, row: SessionRow) -> None:
        via = f" (from {first_line(row.handoff_from, 40)}'s handoff)" if row.handoff_from else ""
        line.append(f"\nsession {row.attempt} {first_line(row.session_id, 40)}{via}: ", style="bold")
        if row.passed is None:
            line.append("working or being graded…", style="cyan")
        elif row.passed:
            line.append("every criterion passed", style="green")
        else:
            line.append(f"{row.failed} {'criterion' if row.failed == 1 else 'criteria'} failed", style="yellow")
            if row.findings:
                line.append(f" — {first_line(row.findings, 160)}", style="dim")


class Goals:
    """The conversation's goal blocks, by goal id."""

    def __init__(self) -> None:
        self._blocks: dict[str, Entry[GoalBlock]] = {}
        self._ended: set[str] = set()

    @property
    def running(self) -> str | None:
        """The newest goal shown that has not ended (``/goal cancel`` ends it)."""
        return next((g for g in reversed(self._blocks) if g not in self._ended), None)

    def block(self, goal_id: str) -> Entry[GoalBlock] | None:
        """The record of a goal's block."""
        return self._blocks.get(goal_id)

    def show(self, event: GoalEvent, add: Callable[[Entry[GoalBlock]], None]) -> None:
        """Change the goal's block (``add`` puts a new one in the conversation)."""
        gid = event.goal_id
        entry = self._blocks.get(gid)
        if entry is None:  # its start is before what this view read: the block starts here
            entry = self._blocks[gid] = Entry(lambda: GoalBlock(gid))
            add(entry)
        entry.change(lambda w: w.apply(event))
        if isinstance(event, GoalFinished):
            self._ended.add(gid)

    def put_older(self, older: Goals) -> None:
        """Take in the records of older history (rendered apart), keeping this one's where both know one."""
        self._blocks = {**older._blocks, **self._blocks}
        self._ended |= older._ended
