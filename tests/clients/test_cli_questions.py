"""A server's question as ``loom run`` shows it, and ``loom answer`` as a user types it: real CLI subprocesses."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from clients.cli.render import TerminalRenderer
from orchestrator.events import QuestionAnswered, QuestionAsked
from tests.clients.cli_support import run_loom, write_script

pytestmark = pytest.mark.timeout(300)

ASKING = Path(__file__).resolve().parents[1] / "orchestrator" / "hub" / "asking_test_server.py"


def test_loom_run_shows_the_question_and_that_a_headless_run_declined_it(tmp_path: Path) -> None:
    home, cwd = tmp_path / "home", tmp_path / "work"
    home.mkdir(mode=0o700)
    cwd.mkdir()
    server = {"command": sys.executable, "args": [str(ASKING)]}
    (home / "config.json").write_text(json.dumps({"mcpServers": {"asking": server}}), encoding="utf-8")
    script = write_script(
        tmp_path / "s.json",
        [
            {"text": "", "tool_calls": [{"id": "a", "name": "asking__ask", "arguments": {"topic": "pears"}}]},
            {"text": "the server said {{result:a}}"},
        ],
    )
    done = run_loom("run", "--model", f"scripted:{script}", "--mode", "bypass", "order", cwd=cwd, home=home)
    assert done.returncode == 0, done.stderr
    assert "asking asks: How many pears should I order, and for whom? (fields: name, count)" in done.stderr
    assert "declined by loom: the session is headless" in done.stderr
    assert "the server said not answered: decline" in done.stdout


def test_the_question_line_says_how_to_answer_and_a_url_question_says_where_to_go() -> None:
    err = io.StringIO()
    render = TerminalRenderer(out=io.StringIO(), err=err)
    render(QuestionAsked(session_id="s", question_id="q_1", server="crm", message="Who?",
                         requested_schema={"properties": {"name": {"type": "string"}}}))  # fmt: skip
    render(QuestionAsked(session_id="s", question_id="q_2", server="crm", message="Sign in\x1b]0;pwned\x07",
                         mode="url", url="https://example.com/login\x1b[2J"))  # fmt: skip
    render(QuestionAnswered(session_id="s", question_id="q_1", action="cancel", answered_by="loom",
                            reason="nobody answered within 5 minutes, so Loom cancelled it"))  # fmt: skip
    first, second, third = err.getvalue().splitlines()
    assert "crm asks: Who? (fields: name)" in first and "loom answer q_1 accept --content" in first
    assert "open https://example.com/login[2J yourself" in second and "loom answer q_2" in second
    assert "\x1b" not in err.getvalue() and "\x07" not in err.getvalue()  # a server's escapes never reach the terminal
    assert third == "loom: question q_1 cancelled by loom: nobody answered within 5 minutes, so Loom cancelled it"


def test_loom_answer_refuses_content_that_is_not_a_json_object_before_reaching_loom(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    done = run_loom("answer", "q_1", "accept", "--content", "[1, 2]", cwd=tmp_path, home=home)
    bad = run_loom("answer", "q_1", "accept", "--content", "{oops", cwd=tmp_path, home=home)
    assert done.returncode == 2 and "must be a JSON object" in done.stderr
    assert bad.returncode == 2 and "not JSON" in bad.stderr
