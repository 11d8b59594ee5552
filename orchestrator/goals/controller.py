"""The goal controller: work sessions toward a goal, each judged by a grader child, until it passes or the budget ends.

Each attempt is a work session, a child of the goal's session, given a brief (the goal, every criterion and, after a
failure, the grader's findings: :func:`~orchestrator.goals.grading.work_brief`), its run bounded by the steps and
time left. When its run ends a grader child (the built-in ``grader``, read-only tools) is given the evidence and
answers a verdict per criterion; an unreadable verdict is sent back once, then counts as a failure that says so.
A passed verdict completes the goal; a failed one starts the next session with the findings, after the budget is
checked; a spent budget fails the goal with what is left. A work session that passed the handoff watermark is
continued through ``handoff_session`` rather than by a fresh session.

Every step is an event on the goal's session, appended before the controller acts on it (the state is only ever the
fold of what was recorded: :mod:`orchestrator.goals.state`), so :meth:`GoalController.drive` carries a goal on from
its events after a restart: a finished session is never run again, an interrupted work session's run is resumed
(or started, if it never began), an interrupted grading is re-run.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Sequence

import anyio

from orchestrator.agents.children import ChildError, ChildHandle, ChildOutcome, ChildSpec
from orchestrator.events import Event
from orchestrator.events_long import (
    CriterionVerdict,
    GoalBudget,
    GoalFinished,
    GoalSessionStarted,
    GoalStarted,
    GoalStatus,
    GoalVerdict,
)
from orchestrator.goals.budget import session_steps, session_timeout, spent_reason, with_defaults
from orchestrator.goals.face import GoalChildren
from orchestrator.goals.grading import (
    MAX_REASON_CHARS,
    Evidence,
    VerdictError,
    gather,
    grader_brief,
    parse_verdict,
    retry_brief,
    tokens_of,
    work_brief,
)
from orchestrator.goals.settings import GoalSettings
from orchestrator.goals.state import Attempt, GoalState, findings_of, left_criteria

__all__ = ["GRADER", "GoalController", "GoalError", "GoalSettings", "check_goal"]

logger = logging.getLogger(__name__)

GRADER = "grader"
"""The built-in agent the grader children run as."""
MAX_CRITERIA = 30
MAX_CRITERION_CHARS = 1000
MAX_GOAL_CHARS = 16_000
HANDOFF_NOTE = "This session continues a goal; its next message is the brief for this session."
"""The instructions a goal gives the fresh session of a handoff (the brief follows as its first message)."""


class GoalError(ValueError):
    """A goal cannot be started as asked; the message says why."""


def check_goal(goal: str, criteria: Sequence[str]) -> list[str]:
    """The criteria as a goal keeps them (blank ones dropped, whitespace collapsed).

    Raises:
        GoalError: The goal is empty or too long, or there is no criterion, too many, or one too long.
    """
    if not goal.strip():
        raise GoalError("the goal is empty; say what should be achieved")
    if len(goal) > MAX_GOAL_CHARS:
        raise GoalError(f"the goal is {len(goal):,} characters; at most {MAX_GOAL_CHARS:,}")
    kept = [" ".join(c.split()) for c in criteria if c.strip()]
    if not kept:
        raise GoalError("a goal needs at least one acceptance criterion: the grader checks each")
    if len(kept) > MAX_CRITERIA:
        raise GoalError(f"{len(kept)} criteria; at most {MAX_CRITERIA}")
    long = [n for n, c in enumerate(kept, 1) if len(c) > MAX_CRITERION_CHARS]
    if long:
        raise GoalError(f"criterion {long[0]} is longer than {MAX_CRITERION_CHARS} characters; say it shorter")
    return kept


class GoalController:
    """Runs the goals of one goal session through a :class:`~orchestrator.goals.face.GoalChildren`.

    Args:
        children: How children are started, awaited and read, and where events go.
        session_id: The goal's session (the events' ``session_id``, the children's parent).
        settings: How goals run.
    """

    def __init__(self, children: GoalChildren, session_id: str, settings: GoalSettings | None = None) -> None:
        self.children = children
        self.session_id = session_id
        self.settings = settings or GoalSettings()
        self._lock = anyio.Lock()
        self._scopes: dict[str, anyio.CancelScope] = {}
        self._cancelled: dict[str, str] = {}
        self._going: dict[str, ChildHandle] = {}

    async def begin(
        self, goal: str, criteria: Sequence[str], budget: GoalBudget, *, goal_id: str | None = None
    ) -> GoalState:
        """Record a goal's start and return its state for :meth:`drive`.

        Raises:
            GoalError: The goal or its criteria cannot be used; nothing is recorded.
            orchestrator.goals.budget.BudgetError: A limit of the budget is not positive.
        """
        kept = check_goal(goal, criteria)
        started = GoalStarted(
            session_id=self.session_id,
            goal_id=goal_id or f"goal_{secrets.token_hex(6)}",
            goal=goal.strip(),
            criteria=kept,
            budget=with_defaults(budget),
        )
        await self.children.append([started])
        return GoalState(started)

    def cancel(self, goal_id: str, reason: str = "cancelled") -> bool:
        """End a goal driven here: its running child cancelled, the goal recorded ``cancelled``.

        Returns:
            Whether that goal was being driven here.
        """
        scope = self._scopes.get(goal_id)
        if scope is None:
            return False
        self._cancelled[goal_id] = reason
        scope.cancel()
        return True

    async def end(self, state: GoalState, status: GoalStatus, reason: str) -> None:
        """Record a goal that nothing drives as ended (``cancel_goal`` on a goal left by a restart)."""
        await self._finish(state, status, reason)

    async def drive(self, state: GoalState) -> GoalState:
        """Carry a goal from ``state`` to its end (a finished one is returned as it is).

        Cancelling the calling scope stops it where it is, resumable; :meth:`cancel` ends it.
        """
        if state.finished is not None:
            return state
        gid = state.goal_id
        scope = self._scopes[gid] = anyio.CancelScope()
        try:
            with scope:
                await self._attempts(state)
            reason = self._cancelled.pop(gid, None)
            if reason is not None and state.finished is None:  # a cancel that came as it ended changes nothing
                with anyio.CancelScope(shield=True):
                    going = self._going.get(gid)
                    if going is not None and going.run_id:
                        await self.children.cancel(going)
                    await self._count_unjudged(state)
                    await self._finish(state, "cancelled", reason)
        finally:
            self._scopes.pop(gid, None)
            self._going.pop(gid, None)
        return state

    # -- the attempts ----------------------------------------------------------------------------------

    async def _attempts(self, state: GoalState) -> None:
        while state.finished is None:
            attempt = state.last
            resumed = attempt is not None and attempt.verdict is None  # recorded before a restart: carry it on
            if attempt is None or attempt.verdict is not None:
                spent = spent_reason(state.started.budget, state.spent)
                if spent:
                    await self._finish(state, "failed", f"not every criterion was met and {spent}")
                    return
                try:
                    attempt = await self._new_session(state)
                except ChildError as exc:
                    await self._finish(state, "failed", f"a work session could not be started: {exc}")
                    return
            evidence = await self._work(state, attempt, resumed)
            if evidence is None:
                return  # its run could not be started: the goal failed, saying why
            if resumed:
                await self._drop_unjudged_graders(state)
            verdict = await self._grade(state, attempt, evidence)
            if verdict is None:
                return
            if verdict.passed:
                await self._finish(
                    state,
                    "completed",
                    f"every criterion passed after {attempt.started.attempt} "
                    f"session{'s' if attempt.started.attempt != 1 else ''}",
                )

    async def _new_session(self, state: GoalState) -> Attempt:
        """Create the next work session (fresh, or from the last one's handoff) and record it; shielded."""
        number = len(state.attempts) + 1
        last = state.last
        findings = last.verdict.findings if last is not None and last.verdict is not None else ""
        brief = work_brief(state.started.goal, state.started.criteria, attempt=number, findings=findings)
        with anyio.CancelScope(shield=True):
            handoff_from = ""
            session_id: str | None = None
            if last is not None and await self._past_watermark(last.started.child_session_id):
                try:
                    session_id = await self.children.handoff(last.started.child_session_id, HANDOFF_NOTE)
                except ChildError as exc:  # a handoff that failed its checks leaves the old session as it was
                    logger.warning("goal %s: no handoff (%s); the next session starts fresh", state.goal_id, exc)
                handoff_from = last.started.child_session_id if session_id else ""
            if session_id is None:
                session_id = await self.children.create(self._spec("", brief, state, number))
            spent = state.spent.model_copy(update={"sessions": state.spent.sessions + 1})
            event = GoalSessionStarted(
                session_id=self.session_id,
                goal_id=state.goal_id,
                attempt=number,
                child_session_id=session_id,
                brief=brief,
                handoff_from=handoff_from,
                spent=spent,
            )
            await self._record(state, event)
        assert state.last is not None
        return state.last

    async def _past_watermark(self, session_id: str) -> bool:
        at = self.settings.handoff_at
        if at is None:
            return False
        ratio = await self.children.context_ratio(session_id)
        return ratio is not None and ratio >= at

    def _spec(self, agent: str, brief: str, state: GoalState, number: int) -> ChildSpec:
        budget = state.started.budget
        if agent:
            return ChildSpec(agent, brief, self.settings.grader_timeout_s, f"{state.goal_id}/{number}/grader")
        return ChildSpec(
            "",
            brief,
            session_timeout(budget, state.spent),
            f"{state.goal_id}/{number}/work",
            max_steps=session_steps(budget, state.spent),
        )

    async def _run(self, state: GoalState, session_id: str, spec: ChildSpec, resumed: bool) -> ChildOutcome | None:
        """Start (or, ``resumed``, find) the child's run and wait for it; None if it ran past its deadline."""
        with anyio.CancelScope(shield=True):
            found = await self.children.find_run(session_id) if resumed else None
            run_id = found or await self.children.start(session_id, spec)
        child = self._going[state.goal_id] = ChildHandle(session_id, run_id)
        outcome = await self.children.wait(child, spec.timeout_s + self.settings.wait_grace_s)
        if outcome is None:
            with anyio.CancelScope(shield=True):
                await self.children.cancel(child)
        return outcome

    async def _work(self, state: GoalState, attempt: Attempt, resumed: bool) -> Evidence | None:
        """Run (``resumed``: carry on, after a restart) the attempt's work session; the evidence of what it did."""
        started = attempt.started
        spec = self._spec("", started.brief, state, started.attempt)
        try:
            await self._run(state, started.child_session_id, spec, resumed=resumed)
        except ChildError as exc:
            await self._finish(state, "failed", f"work session {started.child_session_id} could not run: {exc}")
            return None
        return gather(await self.children.events(started.child_session_id))

    async def _drop_unjudged_graders(self, state: GoalState) -> None:
        """Cancel a grader a restart interrupted (its run resumed with the host's): the grading is done again."""
        judged = {a.verdict.grader_session_id for a in state.attempts if a.verdict is not None}
        with anyio.CancelScope(shield=True):
            for grader in await self.children.graders():
                if grader not in judged:
                    await self.children.cancel_session_run(grader)

    async def _grade(self, state: GoalState, attempt: Attempt, evidence: Evidence) -> GoalVerdict | None:
        """Ask a grader child for the verdict on the attempt's evidence, and record it."""
        started = attempt.started
        criteria = state.started.criteria
        brief = grader_brief(state.started.goal, criteria, evidence, work_session_id=started.child_session_id)
        spec = self._spec(GRADER, brief, state, started.attempt)
        try:
            grader = await self.children.create(spec)
            verdicts = await self._verdicts(state, grader, spec, criteria)
        except ChildError as exc:
            await self._finish(state, "failed", f"the grader could not be started: {exc}")
            return None
        tokens = evidence.tokens + tokens_of(await self.children.events(grader))
        passed = all(v.passed for v in verdicts)
        spent = state.spent.model_copy(
            update={
                "steps": state.spent.steps + evidence.steps,
                "tokens": state.spent.tokens + tokens,
                "time_s": round(state.spent.time_s + max(0.0, time.time() - started.ts), 3),
            }
        )
        event = GoalVerdict(
            session_id=self.session_id,
            goal_id=state.goal_id,
            attempt=started.attempt,
            child_session_id=started.child_session_id,
            grader_session_id=grader,
            passed=passed,
            criteria=verdicts,
            findings="" if passed else findings_of(verdicts),
            spent=spent,
        )
        await self._record(state, event)
        return event

    async def _verdicts(
        self, state: GoalState, grader: str, spec: ChildSpec, criteria: Sequence[str]
    ) -> list[CriterionVerdict]:
        """The grader's verdict per criterion; a failure that says so when it gave none readable (after one retry)."""
        problem = ""
        for turn in range(2):
            ask = (
                spec
                if turn == 0
                else ChildSpec(spec.agent, retry_brief(problem, len(criteria)), spec.timeout_s, spec.label)
            )
            outcome = await self._run(state, grader, ask, resumed=False)
            if outcome is None or outcome.status != "completed":
                why = (
                    "timed out"
                    if outcome is None
                    else f"{outcome.status}" + (f": {outcome.reason}" if outcome.reason else "")
                )
                return _all_failed(criteria, f"the grader's run {why}, so nothing was judged")
            try:
                return parse_verdict(outcome.final_text, criteria)
            except VerdictError as exc:
                problem = str(exc)
        return _all_failed(criteria, f"the grader's answer could not be read as a verdict, twice: {problem}")

    async def _count_unjudged(self, state: GoalState) -> None:
        """Add what the last work session spent, when it was never graded, to what the goal has spent."""
        last = state.last
        if last is None or last.verdict is not None:
            return
        evidence = gather(await self.children.events(last.started.child_session_id))
        state.spent = state.spent.model_copy(
            update={
                "steps": state.spent.steps + evidence.steps,
                "tokens": state.spent.tokens + evidence.tokens,
                "time_s": round(state.spent.time_s + max(0.0, time.time() - last.started.ts), 3),
            }
        )

    async def _finish(self, state: GoalState, status: GoalStatus, reason: str) -> None:
        # The notes the work sessions kept are promoted for the next goal BEFORE the end is recorded: a client that
        # waits for the end (`loom goal`) may close the runtime as soon as it sees it. Promoting is idempotent, so a
        # crash in between promotes nothing twice when the resumed goal finishes.
        with anyio.CancelScope(shield=True), anyio.move_on_after(30):
            for attempt in state.attempts:
                child = attempt.started.child_session_id
                try:
                    await self.children.archive_memory(child)
                except Exception as exc:  # promotion is a courtesy: the goal ends either way
                    logger.warning("goal %s: promoting session %s's notes failed: %s", state.goal_id, child, exc)
        left = [] if status == "completed" else left_criteria(state)
        event = GoalFinished(
            session_id=self.session_id,
            goal_id=state.goal_id,
            status=status,
            reason=reason,
            left=left,
            spent=state.spent,
        )
        await self._record(state, event)

    async def _record(self, state: GoalState, event: Event) -> None:
        """Store the event, then fold it: the state acted on is what a restart would rebuild."""
        async with self._lock:
            await self.children.append([event])
            state.apply(event)


def _all_failed(criteria: Sequence[str], reason: str) -> list[CriterionVerdict]:
    return [CriterionVerdict(criterion=c, passed=False, reason=reason[:MAX_REASON_CHARS]) for c in criteria]
