from __future__ import annotations

import pytest

from orchestrator.agents.graph import GraphError, GraphState, fold, validate_tasks
from orchestrator.events import (
    EVENT_ADAPTER,
    Event,
    OrchestrationStarted,
    PlannedTask,
    TaskGraphPlanned,
    TaskState,
    TaskStateChanged,
)


def task(tid: str, *deps: str, criteria: tuple[str, ...] = ("it works",)) -> PlannedTask:
    return PlannedTask(id=tid, title=f"do {tid}", brief=f"Do {tid}.", depends_on=list(deps), criteria=list(criteria))


def problems(tasks: list[PlannedTask], **kwargs: int) -> str:
    with pytest.raises(GraphError) as caught:
        validate_tasks(tasks, **kwargs)
    return str(caught.value)


def test_an_unknown_dependency_is_named_with_the_task_that_has_it() -> None:
    message = problems([task("a"), task("b", "a", "ghost")])
    assert "task 'b' depends on 'ghost', which no task has as its id" in message


def test_a_cycle_is_refused_showing_its_path() -> None:
    message = problems([task("a", "c"), task("b", "a"), task("c", "b"), task("d")])
    assert "cycle" in message
    path = message[message.index("(") + 1 : message.index(")")].split(" -> ")
    assert path[0] == path[-1] and set(path) == {"a", "b", "c"}


def test_a_task_depending_on_itself_is_refused() -> None:
    assert "depends on itself" in problems([task("a", "a")])


def test_duplicate_ids_are_refused() -> None:
    assert "task id 'a' is used twice" in problems([task("a"), task("b"), task("a")])


def test_too_many_tasks_are_refused_with_the_limit() -> None:
    assert "the graph has 4 tasks; at most 3" in problems([task(str(i)) for i in range(4)], max_tasks=3)


def test_an_empty_graph_and_a_task_without_criteria_are_refused() -> None:
    assert "no tasks" in problems([])
    assert "task 'a': no acceptance criteria" in problems([task("a", criteria=())])


def test_every_problem_is_listed_not_only_the_first() -> None:
    message = problems([task("a", "x"), task("b", criteria=()), task("bad id!")])
    assert "'x'" in message and "task 'b': no acceptance criteria" in message and "'bad id!' is not valid" in message


def test_hostile_text_is_refused() -> None:
    hidden = PlannedTask(id="a", title="ok", brief="run this\u202e", criteria=["x"])
    assert "control character U+202E" in problems([hidden])
    huge = PlannedTask(id="a", title="ok", brief="x" * 20_000, criteria=["x"])
    assert "brief is 20,000 characters" in problems([huge])


def test_a_deep_chain_validates_without_recursion() -> None:
    chain = [task("t0")] + [task(f"t{i}", f"t{i - 1}") for i in range(1, 50)]
    assert len(validate_tasks(chain)) == 50


def test_duplicate_dependencies_are_dropped() -> None:
    assert validate_tasks([task("a"), task("b", "a", "a")])[1].depends_on == ["a"]


def _state(tasks: list[PlannedTask], moves: list[tuple[str, TaskState]]) -> GraphState:
    events: list[Event] = [
        OrchestrationStarted(
            session_id="s", orchestration_id="o", goal="g", max_parallel=2, task_timeout_s=9, max_attempts=2
        ),
        TaskGraphPlanned(session_id="s", orchestration_id="o", tasks=tasks),
        *(TaskStateChanged(session_id="s", orchestration_id="o", task_id=t, state=s) for t, s in moves),
    ]
    # Through JSON, as a restarted controller reads them back from the store.
    return fold([EVENT_ADAPTER.validate_json(EVENT_ADAPTER.dump_json(e)) for e in events], "o")


def test_only_tasks_whose_dependencies_passed_are_ready() -> None:
    graph = [task("a"), task("b", "a"), task("c", "a", "b"), task("d")]
    assert _state(graph, []).ready() == ["a", "d"]
    assert _state(graph, [("a", "passed")]).ready() == ["b", "d"]
    assert _state(graph, [("a", "passed"), ("d", "running")]).ready() == ["b"]
    assert _state(graph, [("a", "passed"), ("b", "passed")]).ready() == ["c", "d"]


def test_a_failed_task_blocks_only_its_dependants_and_theirs() -> None:
    graph = [task("a"), task("b", "a"), task("c", "b"), task("d"), task("e", "d")]
    state = _state(graph, [("a", "failed"), ("d", "passed")])
    blocked = state.blocked()
    assert set(blocked) == {"b", "c"}
    assert blocked["b"] == "its dependency 'a' failed"
    assert state.ready() == ["e"]


def test_the_fold_ignores_other_orchestrations_and_unknown_tasks() -> None:
    state = _state([task("a")], [])
    state.apply(TaskStateChanged(session_id="s", orchestration_id="other", task_id="a", state="passed"))
    state.apply(TaskStateChanged(session_id="s", orchestration_id="o", task_id="ghost", state="passed"))
    assert state.tasks["a"].state == "pending" and not state.done()
    with pytest.raises(KeyError):
        fold([], "o")
