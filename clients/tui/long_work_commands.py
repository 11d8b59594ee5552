"""``/goal`` and ``/handoff``: long work through the face's tools, from the prompt.

Both run in the command runner's workers (:mod:`clients.tui.command_runner`), every face call bounded, so the UI
never waits. ``/goal GOAL --accept "criterion" ...`` starts a goal (``start_goal`` answers at once; the goal runs
in the daemon) and shows the goal's own session, whose events draw the goal's block
(:mod:`clients.tui.goal_view`) and whose children are the work and grader sessions; ``/goal cancel`` ends the goal
of the session shown, ``/goal`` alone says where it is. ``/handoff [instructions]`` has the shown session write its
handoff (the session's model writes it, so it takes as long as a model call), then shows the fresh session that
continues from it; the old one is archived and stays in the store.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

import anyio

from clients.long_work_lines import budget_text, spent_text
from clients.loom import LoomClient
from clients.timeline import first_line
from clients.tui.delegate_commands import CommandRefused
from clients.tui.goal_args import GoalArgsError, parse_goal
from orchestrator.events_long import GoalBudget
from orchestrator.protocol_long import GoalReport

if TYPE_CHECKING:
    from clients.tui.app import LoomApp

__all__ = ["CALL_TIMEOUT_S", "HANDOFF_TIMEOUT_S", "LongWorkCommands", "goal_status"]

CALL_TIMEOUT_S = 15.0
"""Starting, reading or listing goals: the face answers at once (the goal runs in the background)."""
CANCEL_TIMEOUT_S = 30.0
"""``cancel_goal`` waits for the goal's running session to stop."""
HANDOFF_TIMEOUT_S = 300.0
"""``handoff_session`` has the session's model write the handoff, then checks it: a model call or two."""

Notice = Callable[[str, Literal["info", "warning", "error"]], None]


def goal_status(report: GoalReport) -> str:
    """Where a goal stands, in a few lines (``/goal`` alone)."""
    lines = [f"goal {report.goal_id} {report.status}: {first_line(report.goal, 200)}"]
    if report.reason:
        lines[0] += f" — {first_line(report.reason, 200)}"
    lines.append(f"  spent {spent_text(report.spent)} of {budget_text(report.budget)}")
    for attempt in report.attempts[-5:]:
        verdict = "being worked on" if attempt.passed is None else "passed" if attempt.passed else "not passed"
        lines.append(f"  session {attempt.attempt} {attempt.session_id}: {verdict}")
    lines += [f"  left: {first_line(item, 200)}" for item in report.left[:10]]
    return "\n".join(lines)


class LongWorkCommands:
    """``/goal`` and ``/handoff`` for ``app``; ``notice`` shows a quiet line in its conversation."""

    def __init__(self, app: LoomApp, notice: Notice) -> None:
        self.app = app
        self.notice = notice

    async def goal(self, loom: LoomClient, args: str) -> None:
        """``/goal GOAL --accept ...`` starts one, ``/goal cancel`` ends this session's, ``/goal`` says where."""
        if args == "cancel":
            report = await self._goal_here(loom)
            with anyio.fail_after(CANCEL_TIMEOUT_S):
                report = await loom.cancel_goal(report.goal_id)
            self.notice(f"goal {report.goal_id}: {report.status}", "info")
        elif not args:
            self.notice(goal_status(await self._goal_here(loom)), "info")
        else:
            await self._start(loom, args)

    async def handoff(self, loom: LoomClient, args: str) -> None:
        """``/handoff [instructions]``: a fresh session continues from this one's handoff, and is shown."""
        session_id = self.app.session_id
        if session_id is None:
            raise CommandRefused("there is no session to hand off yet; send a message first")
        self.notice("writing the handoff (the session's model writes it)…", "info")
        with anyio.fail_after(HANDOFF_TIMEOUT_S):
            report = await loom.handoff_session(session_id, args)
        told = ", with what you added word for word" if args else ""
        archived = "archived, and kept in the store" if report.archived else "kept"
        said = (
            f"handed off: the fresh session {report.new_session_id} starts from {session_id}'s handoff{told}; "
            f"{session_id} is {archived} (loom handoff --show {report.new_session_id} reads the handoff)"
        )
        if self.app.session_id != session_id:  # the user went elsewhere meanwhile: not into that conversation
            self.app.notify(said, timeout=15)
            return
        self.app.switch_to(report.new_session_id)
        self.notice(said, "info")

    async def _start(self, loom: LoomClient, args: str) -> None:
        try:
            wanted = parse_goal(args)
        except GoalArgsError as exc:
            raise CommandRefused(str(exc)) from None
        app = self.app
        # Work sessions run headless: the TUI's default (ask) would leave every edit waiting, so unless another mode
        # was chosen, the goal's own default (accept-edits) applies, as for ``loom goal``.
        mode = "" if app.mode == "ask" else app.mode
        with anyio.fail_after(CALL_TIMEOUT_S):
            report = await loom.start_goal(
                wanted.goal,
                wanted.criteria,
                budget=GoalBudget.model_validate(wanted.budget),
                cwd=str(app.cwd),
                mode=mode,
                model=app.model or "",
            )
        before = app.session_id
        app.switch_to(report.session_id)
        back = f"; {before} is in the sessions panel" if before and before != report.session_id else ""
        self.notice(
            f"goal {report.goal_id} started in its own session {report.session_id}: its block shows each work "
            f"session and the grader's verdicts as they come (/goal cancel ends it){back}",
            "info",
        )

    async def _goal_here(self, loom: LoomClient) -> GoalReport:
        """The newest goal of the shown session (the goal's own, or one of its work sessions)."""
        session_id = self.app.session_id
        with anyio.fail_after(CALL_TIMEOUT_S):
            goals = await loom.list_goals()
        for report in goals:
            if session_id in (report.session_id, *(a.session_id for a in report.attempts)):
                return report
        running = [g for g in goals if g.status == "running"]
        where = f"; running: {', '.join(f'{g.goal_id} ({g.session_id})' for g in running[:5])}" if running else ""
        raise CommandRefused(f"the session shown has no goal (open a goal's session first){where}")
