from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial

import anyio
import pytest

from orchestrator.agents.children import ChildSpec
from orchestrator.agents.graph import fold, orchestrations
from orchestrator.agents.orchestrate import Limits, OrchestrationError, Orchestrator
from orchestrator.agents.report import Report, report, snapshot, unfinished
from orchestrator.events import PlannedTask, TaskStateChanged
from tests.orchestrator.agents.scripted_children import Answer, ScriptedChildren, role_of

pytestmark = pytest.mark.anyio
PASS = '```json\n{"verdict": "pass", "findings": []}\n```'
LIMITS = Limits(max_parallel=4, task_timeout_s=5, max_attempts=3, wait_grace_s=0)


def task(tid: str, *deps: str) -> PlannedTask:
    return PlannedTask(id=tid, title=f"do {tid}", brief=f"Do {tid}.", depends_on=list(deps), criteria=[f"{tid} done"])


def changes(*findings: str) -> str:
    return json.dumps({"verdict": "changes_needed", "findings": list(findings)})


def everyone_passes(spec: ChildSpec) -> Answer:
    tid, attempt, role = role_of(spec)
    return Answer(PASS if role == "reviewer" else f"{tid} done on attempt {attempt}")


def transitions(children: ScriptedChildren) -> list[tuple[str, str, int]]:
    """Each task's moves; a child is recorded twice (session created, run started): only the second is kept."""
    return [
        (e.task_id, e.state, e.attempt)
        for e in children.events
        if isinstance(e, TaskStateChanged) and not (e.state in ("running", "reviewing") and not e.child_run_id)
    ]


async def orchestrate(
    script: Callable[[ChildSpec], Answer], tasks: list[PlannedTask] | None, limits: Limits = LIMITS
) -> tuple[Report, ScriptedChildren]:
    async with ScriptedChildren(script) as children:
        with anyio.fail_after(10):
            result = await Orchestrator(children, "parent").run("ship it", limits, tasks=tasks)
    return result, children


async def test_a_task_starts_only_after_its_dependencies_passed() -> None:
    result, children = await orchestrate(everyone_passes, [task("c", "a", "b"), task("a"), task("b", "a")])
    assert result.status == "passed" and result.reason == "all 3 tasks passed"
    moves = transitions(children)
    started = [tid for tid, state, _ in moves if state == "running"]
    assert started == ["a", "b", "c"]
    for tid, deps in (("b", ["a"]), ("c", ["a", "b"])):
        assert all(moves.index((d, "passed", 1)) < moves.index((tid, "running", 1)) for d in deps)
    # The executor of c was told what its dependencies reported.
    brief = next(s.goal for s in children.spawned if role_of(s) == ("c", 1, "executor"))
    assert "a done on attempt 1" in brief and "b done on attempt 1" in brief


async def test_ready_tasks_run_in_parallel_up_to_the_bound() -> None:
    gate = anyio.Event()

    def script(spec: ChildSpec) -> Answer:
        answer = everyone_passes(spec)
        answer.gate = gate
        return answer

    async with ScriptedChildren(script) as children:
        orchestrator = Orchestrator(children, "parent")
        limits = Limits(max_parallel=3, task_timeout_s=5, wait_grace_s=0)
        async with anyio.create_task_group() as tg:
            tg.start_soon(partial(orchestrator.run, "ship it", limits, tasks=[task(str(i)) for i in range(7)]))
            with anyio.fail_after(5):
                await children.until(lambda: children.running == 3)
            await anyio.wait_all_tasks_blocked()  # a fourth child, if the bound were broken, would have started
            assert children.running == 3
            gate.set()
    assert children.max_running == 3
    assert fold(children.events, orchestrations(children.events)[0]).counts() == {"passed": 7}


async def test_a_failed_task_blocks_only_its_dependants() -> None:
    def script(spec: ChildSpec) -> Answer:
        tid, _, role = role_of(spec)
        if tid == "a" and role == "executor":
            return Answer(status="failed", reason="the model gave up")
        return everyone_passes(spec)

    graph = [task("a"), task("b", "a"), task("c", "b"), task("d"), task("e", "d")]
    result, children = await orchestrate(script, graph)
    states = {t.id: t.state for t in result.tasks}
    assert states == {"a": "failed", "b": "blocked", "c": "blocked", "d": "passed", "e": "passed"}
    assert result.status == "failed" and result.counts == {"failed": 1, "blocked": 2, "passed": 2}
    assert "2 of 5 tasks passed" in result.reason and "1 failed (a)" in result.reason
    a = next(t for t in result.tasks if t.id == "a")
    assert a.attempts == 3 and "the executor's run failed: the model gave up" in a.reason
    assert not any(role_of(s)[0] in ("b", "c") for s in children.spawned)  # never started
    c = next(t for t in result.tasks if t.id == "c")
    assert c.reason == "its dependency 'b' was blocked"


async def test_a_failed_review_requeues_the_task_with_its_findings() -> None:
    def script(spec: ChildSpec) -> Answer:
        tid, attempt, role = role_of(spec)
        if role == "reviewer" and attempt == 1:
            return Answer(changes("src/a.py:3: off by one"))
        return everyone_passes(spec)

    result, children = await orchestrate(script, [task("a")])
    assert result.status == "passed" and result.tasks[0].attempts == 2
    assert transitions(children) == [
        ("a", "ready", 0),
        ("a", "running", 1),
        ("a", "reviewing", 1),
        ("a", "ready", 1),
        ("a", "running", 2),
        ("a", "reviewing", 2),
        ("a", "passed", 2),
    ]
    second = next(s.goal for s in children.spawned if role_of(s) == ("a", 2, "executor"))
    assert "src/a.py:3: off by one" in second and "attempt 2" in second
    requeued = [e for e in children.events if isinstance(e, TaskStateChanged) and e.state == "ready" and e.findings]
    assert requeued[0].findings == ["src/a.py:3: off by one"]


async def test_retries_are_bounded_and_the_last_findings_are_reported() -> None:
    def script(spec: ChildSpec) -> Answer:
        _, attempt, role = role_of(spec)
        return Answer(changes(f"still wrong ({attempt})")) if role == "reviewer" else everyone_passes(spec)

    result, children = await orchestrate(script, [task("a"), task("b")], Limits(max_attempts=2, wait_grace_s=0))
    assert {t.id: (t.state, t.attempts) for t in result.tasks} == {"a": ("failed", 2), "b": ("failed", 2)}
    assert [r for r in children.spawned_roles() if r[0] == "a"] == [
        ("a", 1, "executor"),
        ("a", 1, "reviewer"),
        ("a", 2, "executor"),
        ("a", 2, "reviewer"),
    ]
    assert result.tasks[0].findings == ["still wrong (2)"]
    assert "* still wrong (2)" in result.text()


async def test_a_reviewer_without_a_verdict_does_not_pass_the_task() -> None:
    def script(spec: ChildSpec) -> Answer:
        return Answer("Seems fine.") if role_of(spec)[2] == "reviewer" else everyone_passes(spec)

    result, _ = await orchestrate(script, [task("a")], Limits(max_attempts=1, wait_grace_s=0))
    assert result.tasks[0].state == "failed" and "held no verdict" in result.tasks[0].reason


async def test_an_executor_that_hangs_times_out_and_its_siblings_go_on() -> None:
    def script(spec: ChildSpec) -> Answer:
        tid, _, role = role_of(spec)
        return Answer(hang=True) if tid == "slow" and role == "executor" else everyone_passes(spec)

    limits = Limits(task_timeout_s=0.2, max_attempts=2, wait_grace_s=0)
    result, children = await orchestrate(script, [task("slow"), task("fast")], limits)
    slow, fast = result.tasks
    assert fast.state == "passed"
    assert slow.state == "failed" and slow.attempts == 2 and "timed out after 0.2 s" in slow.reason


async def test_a_planned_graph_is_run() -> None:
    plan = {"tasks": [{"id": "x", "title": "X", "brief": "Do x.", "criteria": ["x"]}]}

    def script(spec: ChildSpec) -> Answer:
        if role_of(spec)[2] == "planner":
            return Answer(f"Plan:\n```json\n{json.dumps(plan)}\n```")
        return everyone_passes(spec)

    result, children = await orchestrate(script, None)
    assert result.status == "passed" and [t.id for t in result.tasks] == ["x"]
    assert children.spawned[0].agent == "planner" and "ship it" in children.spawned[0].goal


async def test_a_malformed_plan_is_sent_back_once_then_fails_clearly() -> None:
    def script(spec: ChildSpec) -> Answer:
        return Answer('```json\n{"tasks": [{"id": "a", "brief": "b", "criteria": ["c"], "depends_on": ["a"]}]}\n```')

    result, children = await orchestrate(script, None)
    assert result.status == "failed" and result.tasks == []
    assert "not a usable task graph after 2 attempts" in result.reason and "depends on itself" in result.reason
    assert [s.agent for s in children.spawned] == ["planner", "planner"]
    assert "could not be used: task 'a' depends on itself" in children.spawned[1].goal
    assert unfinished(children.events) == []


async def test_a_planner_run_that_fails_ends_the_orchestration_saying_so() -> None:
    result, _ = await orchestrate(lambda spec: Answer(status="failed", reason="model unavailable"), None)
    assert result.status == "failed" and result.reason == "planning failed: the planner's run failed: model unavailable"


async def test_a_graph_given_is_validated_before_anything_runs() -> None:
    async with ScriptedChildren(everyone_passes) as children:
        with pytest.raises(OrchestrationError, match="cycle"):
            await Orchestrator(children, "p").run("g", LIMITS, tasks=[task("a", "b"), task("b", "a")])
        with pytest.raises(OrchestrationError, match="goal is empty"):
            await Orchestrator(children, "p").run("  ", LIMITS, tasks=[task("a")])
    assert children.events == [] and children.spawned == []
    with pytest.raises(OrchestrationError, match="max_parallel must be at least 1"):
        Limits(max_parallel=0)


async def test_cancel_stops_the_children_and_records_every_unfinished_task() -> None:
    def script(spec: ChildSpec) -> Answer:
        return Answer(hang=True) if role_of(spec)[0] == "b" else everyone_passes(spec)

    async with ScriptedChildren(script) as children:
        orchestrator = Orchestrator(children, "parent")
        reports: list[Report] = []

        async def go() -> None:
            reports.append(await orchestrator.run("g", LIMITS, tasks=[task("a"), task("b"), task("c", "b")]))

        async with anyio.create_task_group() as tg:
            tg.start_soon(go)
            with anyio.fail_after(5):
                await children.until(lambda: {("b", "running", 1), ("a", "passed", 1)} <= set(transitions(children)))
            oid = unfinished(children.events)[0]
            assert orchestrator.cancel(oid, "the user stopped it")
    result = reports[0]
    assert result.status == "cancelled" and result.reason == "the user stopped it"
    assert {t.id: t.state for t in result.tasks} == {"a": "passed", "b": "cancelled", "c": "cancelled"}
    assert len(children.cancelled) == 1 and unfinished(children.events) == []


async def test_a_child_the_runtime_refuses_fails_its_task_at_once_and_only_blocks_its_dependants() -> None:
    def script(spec: ChildSpec) -> Answer:
        tid, _, role = role_of(spec)
        if tid == "a" and role == "reviewer":
            return Answer(refuse="unknown agent 'reviewer'; known: executor, planner")
        return everyone_passes(spec)

    result, children = await orchestrate(script, [task("a"), task("b", "a"), task("c")])
    assert {t.id: t.state for t in result.tasks} == {"a": "failed", "b": "blocked", "c": "passed"}
    assert (
        result.tasks[0].reason
        == "its reviewer could not be started: unknown agent 'reviewer'; known: executor, planner"
    )
    assert [r for r in children.spawned_roles() if r[0] == "a"] == [("a", 1, "executor")]  # not retried


async def test_a_planner_the_runtime_refuses_ends_the_orchestration_saying_why() -> None:
    result, _ = await orchestrate(lambda spec: Answer(refuse="a mode freer than the parent's"), None)
    assert result.status == "failed"
    assert result.reason == "planning failed: the planner could not be started: a mode freer than the parent's"


async def test_begin_records_the_orchestration_before_it_is_driven() -> None:
    async with ScriptedChildren(everyone_passes) as children:
        orchestrator = Orchestrator(children, "parent")
        state = await orchestrator.begin("g", LIMITS, tasks=[task("a")], orchestration_id="orch_x")
        assert unfinished(children.events) == ["orch_x"] and children.spawned == []
        assert report(state).status == "running" and report(state).tasks[0].state == "pending"
        result = await orchestrator.drive(state)
    assert result.status == "passed" and result.orchestration_id == "orch_x"


async def test_a_snapshot_of_the_newest_orchestration_is_read_from_the_events() -> None:
    result, children = await orchestrate(everyone_passes, [task("a")])
    assert snapshot(children.events) == result == snapshot(children.events, result.orchestration_id)
    assert snapshot(children.events, "nope") is None and snapshot([]) is None
