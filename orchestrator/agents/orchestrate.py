"""The orchestration controller: plan a goal as a task graph, run it with child sessions, review each result.

A planner child answers with the graph (:func:`orchestrator.agents.roles.parse_plan`; an unusable answer is
sent back once with what was wrong, then the orchestration fails saying so). Ready tasks (every dependency
passed) run in executor children, at most ``max_parallel`` at once, each run bounded by ``task_timeout_s``; a
reviewer child checks each result against the task's criteria. A verdict of "changes needed" (or a failed or
timed-out run) re-queues the task with the findings, until ``max_attempts``; then the task fails, and only its
dependants are blocked: the rest of the graph goes on. The outcome is a :class:`Report`.

Every transition is an event in the orchestrating session's log, appended before the controller acts on it
(:class:`~orchestrator.agents.graph.GraphState` is only ever the fold of what was recorded). So
:meth:`Orchestrator.resume` rebuilds an orchestration from its events and carries on: passed tasks are not run
again, and a task whose child was running waits for that child (the host resumes its run like any) instead of
starting another. Cancelling the calling scope leaves the orchestration resumable; :meth:`Orchestrator.cancel`
ends it, cancelling its children and recording every unfinished task ``cancelled``.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence

import anyio

from orchestrator.agents.children import ChildError, ChildHandle, ChildOutcome, Children, ChildSpec
from orchestrator.agents.graph import GraphError, GraphState, TaskProgress, fold, validate_tasks
from orchestrator.agents.limits import Limits, OrchestrationError
from orchestrator.agents.recorder import Recorder, cut, run_failure
from orchestrator.agents.report import Report, report, summary
from orchestrator.agents.roles import executor_brief, parse_plan, parse_verdict, planner_brief, reviewer_brief
from orchestrator.events import (
    Event,
    OrchestrationStarted,
    PlannedTask,
    TaskGraphPlanned,
    TaskGraphPlanning,
)

__all__ = ["Limits", "OrchestrationError", "Orchestrator"]


class Orchestrator(Recorder):
    """Runs orchestrations in one session through a :class:`~orchestrator.agents.children.Children`.

    Args:
        children: How children are started and awaited, and where events go.
        session_id: The orchestrating session (the events' ``session_id``, the children's parent).
    """

    def __init__(self, children: Children, session_id: str) -> None:
        super().__init__(children, session_id)
        self._cancelled: dict[str, str] = {}
        self._scopes: dict[str, anyio.CancelScope] = {}

    async def run(
        self,
        goal: str,
        limits: Limits | None = None,
        *,
        tasks: Sequence[PlannedTask] | None = None,
        orchestration_id: str | None = None,
    ) -> Report:
        """Start an orchestration of ``goal`` and carry it to its end: :meth:`begin`, then :meth:`drive`.

        Raises:
            OrchestrationError: As :meth:`begin`.
        """
        limits = limits or Limits()
        state = await self.begin(goal, limits, tasks=tasks, orchestration_id=orchestration_id)
        return await self.drive(state, limits)

    async def begin(
        self,
        goal: str,
        limits: Limits | None = None,
        *,
        tasks: Sequence[PlannedTask] | None = None,
        orchestration_id: str | None = None,
    ) -> GraphState:
        """Record an orchestration's start (and a given graph), and return its state for :meth:`drive`.

        A face tool that answers at once calls this, answers with ``report(state)``, and drives in the background:
        the orchestration is in the session's log before the tool answers.

        Args:
            goal: What to achieve; the planner's brief.
            limits: Its bounds (defaults: :class:`Limits`).
            tasks: A graph to run instead of asking a planner (validated the same way).
            orchestration_id: Its id (default: a new ``orch_...``).

        Raises:
            OrchestrationError: The goal is empty, or ``tasks`` is not a runnable graph; nothing is recorded.
        """
        limits = limits or Limits()
        if not goal.strip():
            raise OrchestrationError("the goal is empty; say what the orchestration should achieve")
        try:
            checked = validate_tasks(tasks, max_tasks=limits.max_tasks) if tasks is not None else None
        except GraphError as exc:
            raise OrchestrationError(f"the task graph cannot be run: {exc}") from None
        started = OrchestrationStarted(
            session_id=self.session_id,
            orchestration_id=orchestration_id or f"orch_{secrets.token_hex(6)}",
            goal=goal,
            max_parallel=limits.max_parallel,
            task_timeout_s=limits.task_timeout_s,
            max_attempts=limits.max_attempts,
        )
        await self.children.append([started])
        state = GraphState(started)
        if checked is not None:
            await self._record(state, TaskGraphPlanned(**self._ids(state), tasks=checked))
        return state

    async def resume(self, events: Sequence[Event], orchestration_id: str, limits: Limits | None = None) -> Report:
        """Carry on an orchestration from its stored events (the session's, in ``seq`` order).

        Passed tasks are not run again; a task whose executor or reviewer was going waits for that child. A
        finished orchestration is only reported.

        Raises:
            OrchestrationError: No orchestration with that id is in the events.
        """
        try:
            state = fold(events, orchestration_id)
        except KeyError:
            raise OrchestrationError(f"no orchestration {orchestration_id!r} in this session") from None
        return await self.drive(state, limits)

    async def drive(self, state: GraphState, limits: Limits | None = None) -> Report:
        """Carry an orchestration from ``state`` to its end (a finished one is only reported).

        ``limits`` defaults to those it was started with (the rest of :class:`Limits` to their defaults).
        Cancelling the calling scope stops it where it is, resumable; :meth:`cancel` ends it.
        """
        if state.finished is not None:
            return report(state)
        s = state.started
        limits = limits or Limits(
            max_parallel=s.max_parallel, task_timeout_s=s.task_timeout_s, max_attempts=s.max_attempts
        )
        return await self._drive(state, limits)

    def cancel(self, orchestration_id: str, reason: str = "cancelled") -> bool:
        """End a running orchestration: its children are cancelled, its unfinished tasks recorded ``cancelled``.

        Returns:
            Whether an orchestration with that id was running here.
        """
        scope = self._scopes.get(orchestration_id)
        if scope is None:
            return False
        self._cancelled[orchestration_id] = reason
        scope.cancel()
        return True

    # -- driving ---------------------------------------------------------------------------------------

    async def _drive(self, state: GraphState, limits: Limits) -> Report:
        oid = state.orchestration_id
        scope = self._scopes[oid] = anyio.CancelScope()
        try:
            with scope:
                if not state.planned:
                    problem = await self._plan(state, limits)
                    if problem:
                        await self._finish(state, "failed", problem)
                        return report(state)
                await self._run_graph(state, limits)
            if oid in self._cancelled:
                with anyio.CancelScope(shield=True):
                    await self._cancel_all(state, self._cancelled.pop(oid))
            elif state.finished is None:
                await self._finish(state, state.outcome(), summary(state))
        finally:
            self._scopes.pop(oid, None)
        return report(state)

    async def _plan(self, state: GraphState, limits: Limits) -> str:
        """Ask planners for the graph and record it; the problem that ended planning, or ``""``."""
        recorded = state.planner
        first = recorded.attempt if recorded is not None else 1
        problem = recorded.problem if recorded is not None else ""
        for attempt in range(first, limits.plan_attempts + 1):
            # A planner recorded before a restart is waited for (or, never started, started), not created again.
            known = (
                ChildHandle(recorded.child_session_id, recorded.child_run_id)
                if recorded is not None and recorded.attempt == attempt
                else None
            )
            spec = ChildSpec(
                agent="planner",
                goal=planner_brief(state.started.goal, max_tasks=limits.max_tasks, problem=problem),
                timeout_s=limits.task_timeout_s,
                label=f"{state.orchestration_id}/plan/{attempt}",
            )

            async def planning(child: ChildHandle, attempt: int = attempt, problem: str = problem) -> None:
                event = TaskGraphPlanning(
                    **self._ids(state),
                    attempt=attempt,
                    child_session_id=child.session_id,
                    child_run_id=child.run_id,
                    problem=problem,
                )
                await self._record(state, event)

            try:
                child = await self._launch(spec, known, planning)
            except ChildError as exc:
                return f"planning failed: the planner could not be started: {exc}"
            outcome = await self._wait(child, limits)
            if outcome is None or outcome.status != "completed":
                return "planning failed: " + run_failure("planner", outcome, limits.task_timeout_s)
            try:
                tasks = parse_plan(outcome.final_text, max_tasks=limits.max_tasks)
            except GraphError as exc:
                problem = str(exc)
                continue
            await self._record(
                state, TaskGraphPlanned(**self._ids(state), tasks=tasks, planner_session_id=child.session_id)
            )
            return ""
        return f"the planner's answer was not a usable task graph after {limits.plan_attempts} attempts: {problem}"

    async def _run_graph(self, state: GraphState, limits: Limits) -> None:
        slots = anyio.Semaphore(limits.max_parallel)
        scheduled: set[str] = set()
        changed = anyio.Event()

        async def worker(tid: str) -> None:
            nonlocal changed
            try:
                async with slots:
                    await self._work(state, tid, limits)
            finally:
                scheduled.discard(tid)
                changed.set()

        async with anyio.create_task_group() as tg:
            # Tasks that had a child going when the controller stopped come first: they take their slots again.
            for tid in state.in_flight():
                scheduled.add(tid)
                tg.start_soon(worker, tid)
            while True:
                for tid, why in state.blocked().items():
                    await self._task_event(state, tid, "blocked", attempt=state.tasks[tid].attempt, reason=why)
                for tid in state.ready():
                    if tid not in scheduled:
                        if state.tasks[tid].state == "pending":
                            await self._task_event(state, tid, "ready", attempt=state.tasks[tid].attempt)
                        scheduled.add(tid)
                        tg.start_soon(worker, tid)
                if not scheduled:
                    break
                await changed.wait()
                changed = anyio.Event()

    async def _work(self, state: GraphState, tid: str, limits: Limits) -> None:
        """Carry one task from where its events left it to ``passed`` or ``failed``, re-queueing it between."""
        task = state.tasks[tid]
        while not task.final:
            if task.state == "reviewing":  # after a restart: the recorded reviewer, never a second one
                known: ChildHandle | None = ChildHandle(task.child_session_id, task.child_run_id)
                result = task.result
            else:
                done = await self._execute(state, task, limits)
                if done is None:
                    continue  # re-queued, or failed
                known, result = None, cut(done.final_text)
            spec = ChildSpec(
                agent="reviewer",
                goal=reviewer_brief(task.spec, result=result),
                timeout_s=limits.task_timeout_s,
                label=f"{state.orchestration_id}/{tid}/{task.attempt}/reviewer",
            )

            async def reviewing(child: ChildHandle, result: str = result) -> None:
                await self._task_event(state, tid, "reviewing", attempt=task.attempt, child=child, result=result)

            try:
                reviewer = await self._launch(spec, known, reviewing)
            except ChildError as exc:
                await self._refused(state, task, "reviewer", exc)
                return
            await self._review(state, task, reviewer, limits)

    async def _execute(self, state: GraphState, task: TaskProgress, limits: Limits) -> ChildOutcome | None:
        """Run the task's executor (the recorded one after a restart); its outcome, or None if the task moved on."""
        tid = task.spec.id
        resumed = task.state == "running"
        attempt = task.attempt if resumed else task.attempt + 1
        inputs = {dep: state.tasks[dep].result for dep in task.spec.depends_on}
        spec = ChildSpec(
            agent="executor",
            goal=executor_brief(
                task.spec, goal=state.started.goal, inputs=inputs, findings=task.findings, attempt=attempt
            ),
            timeout_s=limits.task_timeout_s,
            label=f"{state.orchestration_id}/{tid}/{attempt}/executor",
        )

        async def running(child: ChildHandle) -> None:
            await self._task_event(state, tid, "running", attempt=attempt, child=child)

        known = ChildHandle(task.child_session_id, task.child_run_id) if resumed else None
        try:
            executor = await self._launch(spec, known, running)
        except ChildError as exc:
            await self._refused(state, task, "executor", exc)
            return None
        outcome = await self._wait(executor, limits)
        if outcome is None or outcome.status != "completed":
            await self._retry_or_fail(state, task, [run_failure("executor", outcome, limits.task_timeout_s)], limits)
            return None
        return outcome

    async def _refused(self, state: GraphState, task: TaskProgress, role: str, error: ChildError) -> None:
        """A child that cannot be started fails its task at once: starting it again would be refused again."""
        why = cut(f"its {role} could not be started: {error}")
        await self._task_event(state, task.spec.id, "failed", attempt=task.attempt, reason=why)

    async def _review(self, state: GraphState, task: TaskProgress, reviewer: ChildHandle, limits: Limits) -> None:
        outcome = await self._wait(reviewer, limits)
        if outcome is None or outcome.status != "completed":
            # Fail closed: a review that did not finish never passes a task, and it costs an attempt, so it is bounded.
            await self._retry_or_fail(state, task, [run_failure("reviewer", outcome, limits.task_timeout_s)], limits)
            return
        verdict = parse_verdict(outcome.final_text)
        if verdict.passed:
            await self._task_event(
                state,
                task.spec.id,
                "passed",
                attempt=task.attempt,
                findings=list(verdict.findings),
                result=task.result,
                reason="the reviewer accepted it",
            )
        else:
            await self._retry_or_fail(state, task, list(verdict.findings), limits)

    async def _retry_or_fail(self, state: GraphState, task: TaskProgress, findings: list[str], limits: Limits) -> None:
        tid = task.spec.id
        if task.attempt < limits.max_attempts:
            why = f"attempt {task.attempt} was not accepted; re-queued with the findings"
            await self._task_event(state, tid, "ready", attempt=task.attempt, findings=findings, reason=why)
        else:
            why = f"not accepted after {task.attempt} attempt{'s' if task.attempt != 1 else ''}: " + "; ".join(findings)
            await self._task_event(state, tid, "failed", attempt=task.attempt, findings=findings, reason=cut(why))

    async def _cancel_all(self, state: GraphState, reason: str) -> None:
        """After :meth:`cancel`: cancel the children still going, record the unfinished tasks, end the graph."""
        going = [
            ChildHandle(state.tasks[tid].child_session_id, state.tasks[tid].child_run_id) for tid in state.in_flight()
        ]
        if state.planner is not None and not state.planned:
            going.append(ChildHandle(state.planner.child_session_id, state.planner.child_run_id))
        for child in going:
            if child.run_id:  # a child whose run never started has nothing to cancel
                await self.children.cancel(child)
        for tid, task in state.tasks.items():
            if not task.final:
                await self._task_event(state, tid, "cancelled", attempt=task.attempt, reason=reason)
        await self._finish(state, "cancelled", reason)
