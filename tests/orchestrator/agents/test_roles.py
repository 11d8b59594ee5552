from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.agents.graph import GraphError
from orchestrator.agents.roles import (
    builtin_agents,
    catalog_with_builtins,
    executor_brief,
    parse_plan,
    parse_verdict,
    planner_brief,
)
from orchestrator.events import PlannedTask

GRAPH = {
    "tasks": [
        {"id": "parser", "title": "Parser", "brief": "Write it.", "depends_on": [], "criteria": ["tests pass"]},
        {"id": "docs", "title": "Docs", "brief": "Document it.", "depends_on": ["parser"], "criteria": ["a page"]},
    ]
}


def test_a_fenced_graph_is_found_among_prose_and_other_blocks() -> None:
    answer = (
        "I read the project.\n\n```bash\nls src\n```\n\nHere is the plan:\n\n```json\n"
        + json.dumps(GRAPH, indent=2)
        + "\n```\n"
    )
    tasks = parse_plan(answer)
    assert [t.id for t in tasks] == ["parser", "docs"] and tasks[1].depends_on == ["parser"]


def test_a_bare_graph_or_one_inside_prose_braces_is_read() -> None:
    assert len(parse_plan(json.dumps(GRAPH))) == 2
    assert len(parse_plan("Plan: " + json.dumps(GRAPH) + " Done.")) == 2


def test_common_key_variants_and_numeric_ids_are_read() -> None:
    answer = json.dumps(
        {
            "tasks": [
                {"id": 1, "description": "First.", "acceptance_criteria": "it runs"},
                {"id": 2, "brief": "Second.", "dependencies": [1], "criteria": ["ok"]},
            ]
        }
    )
    tasks = parse_plan(answer)
    assert [(t.id, t.title, t.depends_on, t.criteria) for t in tasks] == [
        ("1", "1", [], ["it runs"]),
        ("2", "2", ["1"], ["ok"]),
    ]


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("I could not make a plan.", "holds no JSON object with a 'tasks' list"),
        ('```json\n{"tasks": [\n  {"id": "a",}\n]}\n```', "its JSON is not valid (Expecting property name"),
        ('{"tasks": "do everything"}', "'tasks' must be a list"),
        ('{"tasks": ["do a", "do b"]}', "task 1 is not an object"),
        ('{"tasks": [{"id": "a", "criteria": ["x"]}]}', "task 'a' has no brief"),
        ('{"tasks": [{"id": "a", "brief": "b", "criteria": ["x"], "depends_on": ["z"]}]}', "which no task has"),
    ],
)
def test_a_malformed_plan_gets_a_clear_error(answer: str, expected: str) -> None:
    with pytest.raises(GraphError) as caught:
        parse_plan(answer)
    assert expected in str(caught.value)


def test_a_broken_json_error_says_where() -> None:
    with pytest.raises(GraphError) as caught:
        parse_plan('```json\n{"tasks": [\n  {"id": "a",}\n]}\n```')
    assert "line 2, column" in str(caught.value)


def test_a_huge_or_deeply_nested_answer_is_refused_not_parsed() -> None:
    with pytest.raises(GraphError, match="characters; a task graph needs far fewer"):
        parse_plan("x" * 500_000)
    with pytest.raises(GraphError):
        parse_plan("[" * 100_000 + "]" * 100_000)


def test_verdicts_are_read_in_their_forms() -> None:
    assert parse_verdict('ok\n```json\n{"verdict": "pass", "findings": []}\n```').passed
    changes = parse_verdict(
        json.dumps(
            {
                "verdict": "changes_needed",
                "findings": [{"file": "src/a.py", "line": 3, "message": "off by one"}, "no test"],
            }
        )
    )
    assert not changes.passed and changes.findings == ("src/a.py:3: off by one", "no test")
    assert parse_verdict("Verdict: PASS - all criteria met").passed
    assert not parse_verdict("CHANGES NEEDED: the docs are missing").passed


def test_an_answer_without_a_verdict_never_passes() -> None:
    verdict = parse_verdict("Looks great to me, I think?")
    assert not verdict.passed and not verdict.readable
    assert "held no verdict" in verdict.findings[0]
    assert parse_verdict('{"verdict": "changes_needed"}').findings == (
        "the reviewer asked for changes without saying which",
    )


def test_briefs_carry_what_each_child_needs() -> None:
    task = PlannedTask(id="docs", title="Docs", brief="Document it.", depends_on=["parser"], criteria=["a page"])
    brief = executor_brief(
        task, goal="ship the parser", inputs={"parser": "added src/p.py"}, findings=["docs/p.md:1: empty"], attempt=2
    )
    assert "Document it." in brief and "- a page" in brief and "added src/p.py" in brief
    assert "attempt 2" in brief and "docs/p.md:1: empty" in brief
    assert "previous answer could not be used: bad json" in planner_brief("g", max_tasks=5, problem="bad json")


def test_the_builtin_roles_load_and_a_users_definition_replaces_one(tmp_path: Path) -> None:
    builtin = builtin_agents()
    assert set(builtin) == {"planner", "executor", "reviewer", "grader"}
    assert builtin["planner"].mode == "plan" and "fs__write" not in (builtin["planner"].tools or ())
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "mine.md").write_text("---\nname: reviewer\ndescription: Mine.\n---\nBe strict.\n")
    catalog = catalog_with_builtins(tmp_path, None)
    assert set(catalog.agents) == {"planner", "executor", "reviewer", "grader"}
    assert catalog.agents["reviewer"].prompt == "Be strict."
    assert catalog.agents["reviewer"].overrides == builtin["reviewer"].path


def test_a_flood_of_tasks_is_refused_before_any_is_read() -> None:
    flood = json.dumps({"tasks": [{"id": f"t{i}", "brief": "x", "criteria": ["x"]} for i in range(5000)]})
    with pytest.raises(GraphError, match="the graph has 5000 tasks; at most 50"):
        parse_plan(flood)


def test_an_executor_brief_after_many_dependencies_stays_bounded() -> None:
    deps = [f"t{i}" for i in range(50)]
    task = PlannedTask(id="last", title="Last", brief="Finish.", depends_on=deps, criteria=["done"])
    brief = executor_brief(task, goal="g", inputs=dict.fromkeys(deps, "x" * 5000), findings=[], attempt=1)
    assert len(brief) < 25_000 and all(f"[{d}]" in brief for d in deps)
