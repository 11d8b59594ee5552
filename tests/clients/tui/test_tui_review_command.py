"""``/review`` against a real daemon: a reviewer child of the shown session, its block live, then its verdict.

A real git repository with an uncommitted change, the built-in reviewer run by a scripted model (the session's, which
the reviewer inherits); the TUI makes the session for it, as a first message would.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from clients.tui.review_view import ReviewBlock
from tests.clients.cli_support import write_script
from tests.clients.tui.support import SIZE, connected, tui, type_message, until
from tests.orchestrator.agents.test_review import repo_with_commit
from tests.orchestrator.daemon.daemon_process import running_daemon

pytestmark = pytest.mark.timeout(120)

FINDINGS = [
    {"file": "calc.py", "line": 2, "severity": "error", "message": "subtracts instead of adding"},
    {"file": "calc.py", "line": 1, "severity": "warning", "message": "no type hints"},
]


async def reviewed(home: Path, repo: Path, model: str) -> tuple[str, str, str]:
    """The review block's text, the reviewer child block's status and the shown session's id."""
    app = tui(home, repo, model)
    async with app.run_test(size=SIZE) as pilot:
        await connected(pilot)
        await type_message(pilot, "/review")
        await until(pilot, lambda: bool(app.query(ReviewBlock)), "the verdict's block")
        (block,) = app.query(ReviewBlock)
        child = app.conversation.child(block.info.reviewer_session_id)
        assert child is not None  # the reviewer is the shown session's child, with its own block
        await until(pilot, lambda: child.status == "completed", "the reviewer's block to show its end")
        assert app.session_id == block.info.session_id
        return block.text, child.status, app.session_id


def test_review_shows_the_reviewer_as_a_child_then_its_findings_at_file_and_line(tmp_path: Path) -> None:
    repo, home = repo_with_commit(tmp_path / "repo"), tmp_path / "home"
    (repo / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    text = "Reviewed.\n```json\n" + json.dumps({"verdict": "changes_needed", "findings": FINDINGS}) + "\n```"
    model = f"scripted:{write_script(tmp_path / 'reviewer.json', [{'text': text}])}"
    with running_daemon(home, tmp_path):
        shown, status, session_id = anyio.run(reviewed, home, repo, model)
    assert shown.splitlines()[:3] == [
        "» review of the uncommitted changes: changes needed  (2 findings, 1 must be fixed)",
        "calc.py:2: error: subtracts instead of adding",
        "calc.py:1: warning: no type hints",
    ]
    assert status == "completed" and session_id.startswith("s_")
