"""Nothing a user needs is cut without a mark: a denial's how-to-allow sentence, an error's rest, a file list."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

from clients.cli.render import TerminalRenderer
from clients.cli.trace import TraceEntry
from orchestrator.events import ToolCallFinished
from tests.clients.cli_support import make_project, run_loom, write_script

DENIED_SHELL: list[dict[str, Any]] = [
    {"text": "checking", "tool_calls": [{"id": "sh", "name": "shell__run", "arguments": {"command": "git status"}}]},
    {"text": "done"},
]
HOW_TO_ALLOW = "(User: allow it with a rule in $LOOM_HOME/policy.toml"


def test_a_denial_shows_how_to_allow_the_call_in_the_terminal_and_the_trace(tmp_path: Path) -> None:
    project, home = make_project(tmp_path / "project"), tmp_path / "home"
    script = write_script(tmp_path / "s.json", DENIED_SHELL)

    ran = run_loom("run", "--model", f"scripted:{script}", "check", cwd=project, home=home)
    run_id = re.search(r"run (r_\w+) completed", ran.stderr)
    assert ran.returncode == 0 and run_id is not None, ran
    traced = run_loom("trace", run_id.group(1), "--jsonl", cwd=project, home=home)

    (line,) = [line for line in ran.stdout.splitlines() if "shell__run" in line]
    assert "→ denied by policy" in line and HOW_TO_ALLOW in line, line
    assert line.endswith("see docs/permissions.md.)"), line  # the reason to its last word
    entries = [TraceEntry.model_validate_json(x) for x in traced.stdout.splitlines()]
    (denied,) = [e for e in entries if e.kind == "tool_call" and e.status == "denied"]
    assert HOW_TO_ALLOW in denied.detail and denied.detail.endswith("see docs/permissions.md.)"), denied


def _line_for(content: str) -> str:
    out = io.StringIO()
    event = ToolCallFinished(
        session_id="s", run_id="r", step=1, call_id="c", tool="demo__t", is_error=True,
        failure="tool_error", content=content, duration_ms=1.0,
    )  # fmt: skip
    TerminalRenderer(out=out, err=io.StringIO())(event)
    return out.getvalue().rstrip("\n")


def test_a_long_error_is_cut_with_a_mark_and_a_short_one_is_whole() -> None:
    long_line = _line_for("x" * 500)
    more_lines = _line_for("first line\nsecond line")
    short = _line_for("no such file: a.txt")

    assert long_line.endswith("→ " + "x" * 199 + "…"), long_line
    assert more_lines.endswith("→ first line …"), more_lines
    assert short.endswith("→ no such file: a.txt"), short


def test_the_demo_report_marks_a_file_list_it_cuts(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    names = [f"module_with_a_rather_long_name_{n:03d}.py" for n in range(300)]
    for name in names:
        (project / name).write_text("", encoding="utf-8")

    ran = run_loom("run", "explore", cwd=project, home=tmp_path / "home")

    assert ran.returncode == 0, ran
    report = (project / "loom-report.md").read_text(encoding="utf-8")
    section = report[report.index("## Python files") : report.index("## Documentation")]
    listed = section.splitlines()[3:-2]  # between the heading, the blank line and the code fences
    mark = listed.pop()
    assert re.fullmatch(r"… \([\d,]+ more lines, [\d,]+ characters, not shown\)", mark), mark
    known = {*names, "main.py", "pkg/__init__.py", "pkg/gears.py"}
    assert listed and all(line in known for line in listed), [x for x in listed if x not in known]
    shown = int(re.sub(r"\D", "", mark.split(" more lines")[0]))
    assert len(listed) + shown >= len(names)  # what is shown and what is counted cover the whole list
