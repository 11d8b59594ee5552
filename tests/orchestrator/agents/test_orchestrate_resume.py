"""A controller stopped mid-graph (its task cancelled, as a crash ends it) is resumed from the stored events."""

from __future__ import annotations

import json
from collections import Counter

import anyio
import pytest

from orchestrator.agents.children import ChildSpec
from orchestrator.agents.orchestrate import Limits, OrchestrationError, Orchestrator
from orchestrator.agents.report import unfinished
from orchestrator.events import EVENT_ADAPTER, Event, PlannedTask, TaskStateChanged
from tests.orchestrator.agents.scripted_children import Answer, ProcessDied, ScriptedChildren, role_of

pytestmark = pytest.mark.anyio
PASS = '{"verdict": "pass", "findings": []}'
LIMITS = Limits(max_parallel=4, task_timeout_s=5, wait_grace_s=0)


def task(tid: str, *deps: str) -> PlannedTask:
    return PlannedTask(id=tid, title=tid, brief=f"Do {tid}.", depends_on=list(deps), criteria=[f"{tid} done"])


def stored(events: list[Event]) -> list[Event]:
    """The events as a restarted process reads them back: through JSON."""
    return [EVENT_ADAPTER.validate_json(EVENT_ADAPTER.dump_json(event)) for event in events]


def state_of(children: ScriptedChildren, tid: str) -> str:
    moves = [e.state for e in children.events if isinstance(e, TaskStateChanged) and e.task_id == tid]
    return moves[-1] if moves else "pending"


async def test_resume_mid_graph_reruns_nothing_finished_and_waits_for_the_children_in_flight() -> None:
    executor_gate, reviewer_gate = anyio.Event(), anyio.Event()

    def script(spec: ChildSpec) -> Answer:
        tid, _, role = role_of(spec)
        if role == "reviewer":
            return Answer(PASS, gate=reviewer_gate if tid == "r" else None)
        return Answer(f"{tid} done", gate=executor_gate if tid == "x" else None)

    # a passes; x's executor and r's reviewer are going when the controller dies; c and d wait on them.
    graph = [task("a"), task("x"), task("r"), task("c", "a", "x"), task("d", "r")]
    async with ScriptedChildren(script) as children:
        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: Orchestrator(children, "parent").run("g", LIMITS, tasks=graph))
                wanted = ("passed", "running", "reviewing")
                await children.until(lambda: tuple(state_of(children, t) for t in "axr") == wanted)
                tg.cancel_scope.cancel()  # the controller is gone; its children's runs go on, as the host's do
        before = Counter(children.spawned_roles())
        [oid] = unfinished(children.events)

        executor_gate.set()
        reviewer_gate.set()
        with anyio.fail_after(5):
            result = await Orchestrator(children, "parent").resume(stored(children.events), oid)

    assert result.status == "passed" and {t.state for t in result.tasks} == {"passed"}
    spawned = Counter(children.spawned_roles())
    assert all(count == 1 for count in spawned.values()), spawned  # no child started twice
    # After the restart: x's review (its executor finished after the crash), then the two tasks that waited.
    assert set(spawned - before) == {
        ("x", 1, "reviewer"),
        ("c", 1, "executor"),
        ("c", 1, "reviewer"),
        ("d", 1, "executor"),
        ("d", 1, "reviewer"),
    }
    brief = next(s.goal for s in children.spawned if role_of(s) == ("c", 1, "executor"))
    assert "a done" in brief and "x done" in brief  # results recorded before the crash reach the dependants
    assert unfinished(children.events) == []


async def test_resume_while_planning_waits_for_the_same_planner() -> None:
    gate = anyio.Event()
    plan = json.dumps({"tasks": [{"id": "a", "brief": "Do a.", "criteria": ["a"]}]})

    def script(spec: ChildSpec) -> Answer:
        role = role_of(spec)[2]
        return Answer(plan, gate=gate) if role == "planner" else Answer(PASS if role == "reviewer" else "ok")

    async with ScriptedChildren(script) as children:
        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: Orchestrator(children, "parent").run("g", LIMITS))
                await children.until(lambda: len(children.events) == 2)  # started, then the planner recorded
                tg.cancel_scope.cancel()
            gate.set()
            result = await Orchestrator(children, "parent").resume(
                stored(children.events), unfinished(children.events)[0]
            )
    assert result.status == "passed"
    assert [r[2] for r in children.spawned_roles()] == ["planner", "executor", "reviewer"]


async def test_resuming_a_finished_orchestration_starts_nothing() -> None:
    async with ScriptedChildren(lambda spec: Answer(PASS if role_of(spec)[2] == "reviewer" else "ok")) as children:
        first = await Orchestrator(children, "parent").run("g", LIMITS, tasks=[task("a")])
        count = len(children.spawned)
        again = await Orchestrator(children, "parent").resume(stored(children.events), first.orchestration_id)
        assert again == first and len(children.spawned) == count
        with pytest.raises(OrchestrationError, match="no orchestration 'nope'"):
            await Orchestrator(children, "parent").resume(children.events, "nope")


@pytest.mark.parametrize("role", ["planner", "executor", "reviewer"])
@pytest.mark.parametrize("step", ["after_create", "after_start"])
async def test_a_crash_between_starting_a_child_and_recording_it_never_runs_it_twice(role: str, step: str) -> None:
    plan = json.dumps({"tasks": [{"id": "a", "brief": "Do a.", "criteria": ["a"]}]})

    def script(spec: ChildSpec) -> Answer:
        kind = role_of(spec)[2]
        text = {"planner": plan, "reviewer": PASS}.get(kind, "a done")
        return Answer(text, die=step if kind == role else "")

    async with ScriptedChildren(script) as children:
        with anyio.fail_after(5):
            try:
                await Orchestrator(children, "parent").run("g", LIMITS)
            except* ProcessDied:
                pass
            [oid] = unfinished(children.events)
            result = await Orchestrator(children, "parent").resume(stored(children.events), oid)
    assert result.status == "passed"
    assert Counter(r[2] for r in children.spawned_roles()) == {"planner": 1, "executor": 1, "reviewer": 1}
    # Died after creating the session: that one never ran and another was made; after starting: found again.
    assert len(children.created) == 3 + (step == "after_create")


async def test_a_planner_restarted_on_its_second_attempt_is_still_told_what_was_wrong() -> None:
    plan = json.dumps({"tasks": [{"id": "a", "brief": "Do a.", "criteria": ["a"]}]})

    def script(spec: ChildSpec) -> Answer:
        _, attempt, kind = role_of(spec)
        if kind == "planner":  # the first answer is no graph; the process dies as the second planner is created
            return Answer("no plan here") if attempt == 1 else Answer(plan, die="after_create")
        return Answer(PASS if kind == "reviewer" else "ok")

    async with ScriptedChildren(script) as children:
        with anyio.fail_after(5):
            try:
                await Orchestrator(children, "parent").run("g", LIMITS)
            except* ProcessDied:
                pass
            result = await Orchestrator(children, "parent").resume(
                stored(children.events), unfinished(children.events)[0]
            )
    assert result.status == "passed"
    second = [s.goal for s in children.spawned if role_of(s) == ("plan", 2, "planner")]
    assert len(second) == 1 and "could not be used: the planner's answer is not a task graph" in second[0]
