"""``loom run`` prints the model's plan for a person: whole when written, then each item as it is marked.

The real ``loom`` in a subprocess, scripted models; ``--json`` carries the same events whole.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.events_long import TodoUpdated
from tests.clients.cli_support import make_project, run_loom, write_script

READ = {"name": "fs__read", "arguments": {"path": "README.md"}}


def test_a_plan_is_printed_when_written_then_item_by_item(tmp_path: Path) -> None:
    project, home = make_project(tmp_path / "project"), tmp_path / "home"
    items = [{"text": "read the readme", "status": "in_progress"}, {"text": "summarise it"}]
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "loom__todo", "arguments": {"items": items}}]},
        {"tool_calls": [READ, {"name": "loom__todo", "arguments": {"marks": [{"item": 1, "status": "completed"}]}}]},
        {"text": "It is about widgets."},
    ]
    model = f"scripted:{write_script(tmp_path / 'plan.json', turns)}"
    result = run_loom("run", "--model", model, "summarise the readme", cwd=project, home=home)
    assert result.returncode == 0, result
    said = [line for line in result.stderr.splitlines() if "plan" in line or line.startswith("loom:   [")]
    assert said == [
        "loom: plan 0/2 done; now: read the readme",
        "loom:   [>] read the readme",
        "loom:   [ ] summarise it",
        "loom: plan 1/2 done: [x] read the readme",
    ], result.stderr
    streamed = run_loom("run", "--json", "--model", model, "summarise the readme", cwd=project, home=home)
    assert len([e for e in streamed.events() if isinstance(e, TodoUpdated)]) == 2
