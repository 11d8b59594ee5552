"""``loom review`` as a user runs it: a real subprocess, a real git repository, a scripted reviewer."""

from __future__ import annotations

import json
from pathlib import Path

from tests.clients.cli_support import run_loom, write_script
from tests.orchestrator.agents.test_review import repo_with_commit

CLI_TIMEOUT_S = 90.0
"""A review is two sessions and a run in a fresh process; the shared test machine is slow under load."""


def reviewed_repo(tmp_path: Path) -> Path:
    repo = repo_with_commit(tmp_path / "repo")
    (repo / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    return repo


def reviewer(tmp_path: Path, verdict: str, findings: list[dict[str, object]]) -> str:
    text = "Reviewed.\n```json\n" + json.dumps({"verdict": verdict, "findings": findings}) + "\n```"
    return "scripted:" + str(write_script(tmp_path / f"{verdict}.json", [{"text": text}]))


def test_loom_review_prints_findings_as_path_line_severity_message_and_exits_1(tmp_path: Path) -> None:
    repo = reviewed_repo(tmp_path)
    model = reviewer(
        tmp_path,
        "changes_needed",
        [
            {"file": "calc.py", "line": 2, "severity": "error", "message": "subtracts instead of adding"},
            {"file": "../../etc/passwd", "line": 1, "severity": "warning", "message": "read \x1b[31mthis"},
        ],
    )
    done = run_loom("review", "--model", model, cwd=repo, home=tmp_path / "home", timeout_s=CLI_TIMEOUT_S)
    assert done.returncode == 1, done
    lines = done.stdout.splitlines()
    assert lines[0] == "calc.py:2: error: subtracts instead of adding"
    assert lines[1].startswith("warning: read [31mthis (the file it named, '../../etc/passwd', is outside")
    assert "changes needed" in lines[2] and "\x1b" not in done.stdout
    assert "loom attach" in done.stderr


def test_loom_review_json_on_a_pass_exits_0(tmp_path: Path) -> None:
    repo = reviewed_repo(tmp_path)
    model = reviewer(tmp_path, "pass", [{"file": "calc.py", "line": 1, "severity": "note", "message": "fine"}])
    done = run_loom("review", "--json", "--model", model, cwd=repo, home=tmp_path / "home", timeout_s=CLI_TIMEOUT_S)
    assert done.returncode == 0, done
    result = json.loads(done.stdout)
    assert result["verdict"] == "pass" and result["status"] == "reviewed"
    assert result["findings"] == [{"file": "calc.py", "line": 1, "severity": "note", "message": "fine"}]
    assert result["reviewer_session_id"] and result["run_id"] and result["files"] == ["calc.py"]


def test_loom_review_without_changes_says_so_and_outside_git_exits_2(tmp_path: Path) -> None:
    clean = repo_with_commit(tmp_path / "clean")
    (tmp_path / "plain").mkdir()
    home = tmp_path / "home"
    nothing = run_loom("review", "--model", "scripted:demo", cwd=clean, home=home, timeout_s=CLI_TIMEOUT_S)
    plain = run_loom("review", cwd=tmp_path / "plain", home=home, timeout_s=CLI_TIMEOUT_S)
    assert nothing.returncode == 0 and nothing.stdout.startswith("nothing to review: no changes"), nothing
    assert plain.returncode == 2 and plain.stdout == "", plain
    assert "loom: error:" in plain.stderr and "is not in a git repository" in plain.stderr
