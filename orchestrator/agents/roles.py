"""The orchestration's three roles: what each child is told, and reading what it answers.

The **planner** answers with the task graph as JSON, in a fenced block or bare (:data:`PLAN_FORMAT`);
:func:`parse_plan` finds it (the last fenced block that is a graph, else the whole answer, else its outermost
braces), reads common variants of the keys (``dependencies`` for ``depends_on``, ``acceptance_criteria`` for
``criteria``) and validates it (:func:`orchestrator.agents.graph.validate_tasks`). The **executor** gets one
task's brief, its criteria, what its dependencies produced and, on a retry, the reviewer's findings
(:func:`executor_brief`). The **reviewer** answers with a verdict (:data:`VERDICT_FORMAT`, :func:`parse_verdict`);
an answer with no readable verdict counts as "changes needed", never as a pass.

Their definitions ship as markdown files in ``orchestrator/agents/builtin/`` (Claude Code's format, like any
definition); :func:`builtin_agents` reads them, and a user or project definition of the same name replaces one.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from orchestrator.agents.definitions import AgentDefinition, parse_definition
from orchestrator.agents.graph import MAX_TASKS, GraphError, validate_tasks
from orchestrator.agents.loading import AgentCatalog, find_agents
from orchestrator.events import CHILD_TEXT_CHARS, PlannedTask

__all__ = [
    "BUILTINS",
    "BUILTIN_DIR",
    "PLAN_FORMAT",
    "ROLES",
    "VERDICT_FORMAT",
    "Verdict",
    "builtin_agents",
    "catalog_with_builtins",
    "executor_brief",
    "parse_plan",
    "parse_verdict",
    "planner_brief",
    "reviewer_brief",
    "verdict_object",
]

BUILTIN_DIR = Path(__file__).parent / "builtin"
ROLES = ("planner", "executor", "reviewer")
"""The built-in agents an orchestration runs its children as."""
BUILTINS = (*ROLES, "grader")
"""Every built-in agent: the orchestration's roles and a goal's grader (:mod:`orchestrator.goals`)."""
MAX_ANSWER_CHARS = 400_000
"""A planner's or reviewer's answer longer than this is not read: no graph needs it, and parsing is not free."""
MAX_FINDINGS = 30
MAX_INPUTS_CHARS = 12_000
"""What an executor's brief carries of its dependencies' reports, all together."""
MAX_FINDING_CHARS = 1_000

PLAN_FORMAT = """\
```json
{"tasks": [
  {"id": "parser", "title": "Write the parser", "brief": "Everything the executor needs to know ...",
   "depends_on": [], "criteria": ["parse('') raises ValueError", "tests/test_parser.py passes"]},
  {"id": "docs", "title": "Document it", "brief": "...", "depends_on": ["parser"], "criteria": ["..."]}
]}
```"""
"""The planner's answer, as its brief shows it."""

VERDICT_FORMAT = """\
```json
{"verdict": "pass", "findings": []}
{"verdict": "changes_needed", "findings": ["src/parser.py:42: an empty input returns None instead of raising"]}
```"""
"""The reviewer's answer (one of the two), as its brief shows it."""

_FENCE = re.compile(r"```[ \t]*[A-Za-z0-9_+-]*[ \t]*\r?\n(.*?)```", re.DOTALL)
_PASS = {"pass", "passed", "approve", "approved", "ok", "accept", "accepted", "lgtm"}
_CHANGES = {"changes_needed", "changes needed", "changes-needed", "fail", "failed", "reject", "rejected", "changes"}
_VERDICT_LINE = re.compile(r"^\W*(?:verdict\W*)?(pass(?:ed)?|changes[ _-]needed)\b", re.IGNORECASE | re.MULTILINE)


def _candidates(text: str) -> list[str]:
    """Texts that may hold the JSON, most likely first: fenced blocks (last first), the answer, its braces."""
    fenced = [match.group(1) for match in _FENCE.finditer(text)]
    out = [*reversed(fenced), text]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        out.append(text[start : end + 1])
    return out


def _find_json(text: str, wanted: str) -> tuple[Any | None, str]:
    """The first candidate that parses to an object holding ``wanted`` (or a list), and the last JSON error."""
    error = ""
    for candidate in _candidates(text):
        stripped = candidate.strip()
        if not stripped.startswith(("{", "[")):
            continue
        try:
            value = json.loads(stripped)
        except (ValueError, RecursionError) as exc:
            error = error or (
                f"{exc.msg} at line {exc.lineno}, column {exc.colno}"
                if isinstance(exc, json.JSONDecodeError)
                else "too deep"
            )
            continue
        if isinstance(value, list) or (isinstance(value, dict) and wanted in value):
            return value, ""
    return None, error


def _strings(value: Any, where: str, key: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return [item.strip() for item in value if item.strip()]
    raise GraphError([f"{where}: {key} must be a list of strings"])


def _task(raw: Any, index: int) -> PlannedTask:
    where = f"task {index + 1}"
    if not isinstance(raw, dict):
        raise GraphError([f"{where} is not an object with id, title, brief, depends_on and criteria"])
    task_id = raw.get("id")
    if isinstance(task_id, int) and not isinstance(task_id, bool):
        task_id = str(task_id)  # a planner numbering its tasks 1, 2, 3 means the ids "1", "2", "3"
    if not isinstance(task_id, str) or not task_id.strip():
        raise GraphError([f"{where} has no id; give it a short id such as 'parser'"])
    where = f"task {task_id[:64]!r}"
    brief = raw.get("brief", raw.get("description"))
    if not isinstance(brief, str):
        raise GraphError([f"{where} has no brief; write what the executor must do, with everything it needs to know"])
    title = raw.get("title", task_id)
    if not isinstance(title, str):
        raise GraphError([f"{where}: title must be a string"])
    deps = raw.get("depends_on", raw.get("dependencies", raw.get("deps")))
    if isinstance(deps, list):
        deps = [str(d) if isinstance(d, int) and not isinstance(d, bool) else d for d in deps]
    criteria = raw.get("criteria", raw.get("acceptance_criteria", raw.get("acceptance")))
    return PlannedTask(
        id=task_id.strip(),
        title=title.strip() or task_id.strip(),
        brief=brief.strip(),
        depends_on=_strings(deps, where, "depends_on"),
        criteria=_strings(criteria, where, "criteria"),
    )


def parse_plan(text: str, *, max_tasks: int = MAX_TASKS) -> list[PlannedTask]:
    """The validated task graph in a planner's answer.

    Raises:
        GraphError: The answer holds no graph, its JSON is broken, a task lacks what it needs, or the graph is not
            runnable (:func:`~orchestrator.agents.graph.validate_tasks`); the message says what to fix.
    """
    if len(text) > MAX_ANSWER_CHARS:
        raise GraphError([f"the answer is {len(text):,} characters; a task graph needs far fewer"])
    value, error = _find_json(text, "tasks")
    if value is None:
        why = f"its JSON is not valid ({error})" if error else "it holds no JSON object with a 'tasks' list"
        raise GraphError([f"the planner's answer is not a task graph: {why}; answer with the graph as JSON"])
    raw_tasks = value.get("tasks") if isinstance(value, dict) else value
    if not isinstance(raw_tasks, list):
        raise GraphError(["'tasks' must be a list of task objects"])
    if len(raw_tasks) > max_tasks:
        raise GraphError([f"the graph has {len(raw_tasks)} tasks; at most {max_tasks}, so merge small ones"])
    return validate_tasks([_task(raw, i) for i, raw in enumerate(raw_tasks)], max_tasks=max_tasks)


@dataclass(frozen=True, slots=True)
class Verdict:
    """A reviewer's verdict on one task's result.

    Attributes:
        passed: The result meets the criteria.
        findings: What to fix (or, with a pass, notes), each a short line, ideally ``file:line: what``.
        readable: False when the answer held no verdict (then ``passed`` is False and a finding says so).
    """

    passed: bool
    findings: tuple[str, ...] = ()
    readable: bool = True


def _finding(item: Any) -> str | None:
    if isinstance(item, str):
        text = item
    elif isinstance(item, dict):
        message = item.get("message") or item.get("issue") or item.get("text") or item.get("finding")
        if not isinstance(message, str):
            return None
        place = item.get("file") or item.get("path")
        line = item.get("line")
        at = f"{place}:{line}" if isinstance(place, str) and isinstance(line, int) else place
        text = f"{at}: {message}" if isinstance(at, str) and at else message
    else:
        return None
    text = " ".join(text.split())
    return text[: MAX_FINDING_CHARS - 1] + "…" if len(text) > MAX_FINDING_CHARS else text or None


def verdict_object(text: str) -> dict[str, Any] | None:
    """The JSON object holding ``verdict`` in a reviewer's answer (as :func:`parse_verdict` finds it), or None."""
    value, _ = _find_json(text[:MAX_ANSWER_CHARS], "verdict")
    return value if isinstance(value, dict) else None


def parse_verdict(text: str) -> Verdict:
    """The verdict in a reviewer's answer; one without a readable verdict is "changes needed", saying why."""
    text = text[:MAX_ANSWER_CHARS]
    value, _ = _find_json(text, "verdict")
    if isinstance(value, dict):
        word = str(value.get("verdict", "")).strip().lower()
        raw = value.get("findings")
        items = raw if isinstance(raw, list) else [raw] if raw is not None else []
        findings = tuple(f for f in (_finding(item) for item in items[:MAX_FINDINGS]) if f)
        if word in _PASS:
            return Verdict(True, findings)
        if word in _CHANGES:
            return Verdict(False, findings or ("the reviewer asked for changes without saying which",))
    match = _VERDICT_LINE.search(text)
    if match is not None:
        passed = match.group(1).lower().startswith("pass")
        rest = text[match.end() :].strip()
        return Verdict(passed, () if passed or not rest else (_finding(rest[:MAX_FINDING_CHARS]) or "",))
    return Verdict(
        False,
        (
            "the reviewer's answer held no verdict, so the result was not accepted: "
            + (_finding(text[:300]) or "(empty)"),
        ),
        readable=False,
    )


def planner_brief(goal: str, *, max_tasks: int, problem: str = "") -> str:
    """The planner child's first message: the goal, the format, and (on a second try) what was wrong."""
    again = (
        f"\n\nYour previous answer could not be used: {problem}\nAnswer again with the whole graph." if problem else ""
    )
    return (
        f"Goal:\n{goal}\n\nPlan this goal as a graph of at most {max_tasks} tasks. Each task is carried out by an "
        "executor that sees only that task's brief (never this conversation), then checked by a reviewer against "
        "its acceptance criteria. Tasks that do not depend on each other run in parallel. End your answer with the "
        f"graph as JSON in this format:\n\n{PLAN_FORMAT}{again}"
    )


def _cut(text: str, limit: int = CHILD_TEXT_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def executor_brief(task: PlannedTask, *, goal: str, inputs: dict[str, str], findings: list[str], attempt: int) -> str:
    """An executor child's first message: the task, its criteria, its dependencies' results, earlier findings."""
    parts = [
        f"Overall goal (context only; do just this task):\n{goal}",
        f"Task {task.id}: {task.title}\n\n{task.brief}",
    ]
    parts.append("Acceptance criteria (a reviewer will check each):\n" + "\n".join(f"- {c}" for c in task.criteria))
    if inputs:
        # Each dependency's report gets an equal share of a bounded budget: a task after 50 others must still
        # leave the executor room to work.
        share = max(200, min(CHILD_TEXT_CHARS, MAX_INPUTS_CHARS // len(inputs)))
        parts.append(
            "What the tasks this one depends on reported:\n"
            + "\n\n".join(f"[{dep}]\n{_cut(text, share)}" for dep, text in inputs.items())
        )
    if findings:
        parts.append(
            f"This is attempt {attempt}. A reviewer did not accept the previous attempt (whose changes are in the "
            "working tree). Fix these findings:\n" + "\n".join(f"- {f}" for f in findings)
        )
    parts.append("When you are done, answer with a short summary of what you changed and how you checked it.")
    return "\n\n".join(parts)


def reviewer_brief(task: PlannedTask, *, result: str) -> str:
    """A reviewer child's first message: the task, its criteria and the executor's report."""
    return (
        f"Review the result of task {task.id}: {task.title}\n\n{task.brief}\n\nAcceptance criteria:\n"
        + "\n".join(f"- {c}" for c in task.criteria)
        + f"\n\nThe executor reported:\n{_cut(result) or '(nothing)'}\n\nCheck the working tree against every "
        "criterion (read the files, run the checks). End your answer with the verdict as JSON, one of:\n\n"
        + VERDICT_FORMAT
    )


def builtin_agents() -> dict[str, AgentDefinition]:
    """The built-in definitions (planner, executor, reviewer, grader), by name.

    Raises:
        orchestrator.agents.definitions.AgentError: A shipped file is broken (a packaging fault, not the user's).
    """
    out: dict[str, AgentDefinition] = {}
    for name in BUILTINS:
        path = BUILTIN_DIR / f"{name}.md"
        agent = parse_definition(path.read_text(encoding="utf-8"), path, "user")
        if agent is not None:
            out[agent.name] = agent
    return out


def catalog_with_builtins(home: Path, project: Path | None) -> AgentCatalog:
    """:func:`~orchestrator.agents.loading.find_agents`, with the built-in roles under the user's and project's.

    A user or project definition named ``planner``, ``executor`` or ``reviewer`` replaces the built-in one (its
    ``overrides`` names the shipped file), as a project definition replaces a user one.
    """
    catalog = find_agents(home, project)
    chosen = dict(builtin_agents())
    for name, agent in catalog.agents.items():
        shipped = chosen.get(name)
        chosen[name] = replace(agent, overrides=agent.overrides or shipped.path) if shipped is not None else agent
    return AgentCatalog(dict(sorted(chosen.items())), catalog.problems)
