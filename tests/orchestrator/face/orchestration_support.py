"""Scripted planner, executor and reviewer for orchestrations run through Loom's face (in-process or a daemon).

The roles are installed as the user's agent definitions in ``$LOOM_HOME/agents``: the built-in ones with a
``model: scripted:PATH`` line, so the face resolves them as it would any user's, and each child loads its script
from that file when its session opens. Every executor appends one line to ``log.txt`` in the work directory
(through the shell), so a test counts how often an executor's work really ran.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from orchestrator.agents.roles import BUILTIN_DIR, ROLES

PLAN: dict[str, Any] = {
    "tasks": [
        {"id": "a", "title": "Write a", "brief": "Append to log.txt.", "criteria": ["log.txt has a line"]},
        {"id": "b", "title": "Write b", "brief": "Append to log.txt.", "criteria": ["log.txt has a line"]},
        {"id": "c", "title": "Sum up", "brief": "Append again.", "depends_on": ["a", "b"], "criteria": ["a line"]},
    ]
}
PASS = 'All criteria hold.\n```json\n{"verdict": "pass", "findings": []}\n```'
FAIL = 'No.\n```json\n{"verdict": "changes_needed", "findings": ["log.txt:1: wrong line"]}\n```'
LOG = "log.txt"


def executor_turns(*, delay_s: float = 0.0, after_s: float = 0.0) -> list[dict[str, Any]]:
    """An executor: (after ``delay_s``) appends a line to log.txt, then (after ``after_s``) reports."""
    append = {"name": "shell__run", "arguments": {"command": f"echo ran >> {LOG}"}}
    return [{"delay_s": delay_s, "tool_calls": [append]}, {"delay_s": after_s, "text": "Appended to log.txt."}]


def write_turns(path: Path, turns: Sequence[Mapping[str, Any]]) -> Path:
    """Write a ``scripted:PATH`` script."""
    path.write_text(json.dumps({"turns": list(turns)}), encoding="utf-8")
    return path


def install_roles(
    home: Path,
    root: Path,
    *,
    plan: Mapping[str, Any] = PLAN,
    executor: Sequence[Mapping[str, Any]] | None = None,
    reviewer: str = PASS,
) -> dict[str, Path]:
    """Write each role's script under ``root`` and its definition (built-in body, scripted model) under ``home``."""
    scripts = {
        "planner": write_turns(root / "planner.json", [{"text": "The plan:\n```json\n" + json.dumps(plan) + "\n```"}]),
        "executor": write_turns(root / "executor.json", executor if executor is not None else executor_turns()),
        "reviewer": write_turns(root / "reviewer.json", [{"text": reviewer}]),
    }
    (home / "agents").mkdir(parents=True, exist_ok=True)
    for role in ROLES:
        text = (BUILTIN_DIR / f"{role}.md").read_text(encoding="utf-8")
        head, sep, body = text.partition(f"name: {role}\n")
        assert sep, f"the built-in {role} definition has no name line"
        (home / "agents" / f"{role}.md").write_text(f"{head}{sep}model: scripted:{scripts[role]}\n{body}")
    return scripts


def log_lines(work: Path) -> int:
    """How many executor appends really ran."""
    path = work / LOG
    return len(path.read_text(encoding="utf-8").splitlines()) if path.exists() else 0
