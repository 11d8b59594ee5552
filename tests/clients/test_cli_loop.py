"""``loom run`` on a model that loops: it is told, then stopped, and the run fails with the reason printed."""

from __future__ import annotations

import json
from pathlib import Path

from clients.cli.exits import EXIT_FAILED
from orchestrator.events import RunFinished
from orchestrator.events_long import LoopDetected
from tests.clients.cli_support import make_project, run_loom, write_script

READ = {"text": "Checking the README again.", "tool_calls": [{"name": "fs__read", "arguments": {"path": "README.md"}}]}
REASON = 'loop: fs__read({"path":"README.md"}) repeated 5 times in a row with the same result'


def test_a_looping_run_exits_failed_and_says_why(tmp_path: Path) -> None:
    project, home = make_project(tmp_path / "project"), tmp_path / "home"
    script = write_script(tmp_path / "loop.json", [READ] * 8 + [{"text": "never said"}])

    ran = run_loom("run", "--model", f"scripted:{script}", "check the README", cwd=project, home=home)

    assert ran.returncode == EXIT_FAILED, ran
    assert f"failed after 5 steps: {REASON}" in ran.stderr + ran.stdout, ran
    assert "never said" not in ran.stdout


def test_a_looping_run_s_events_on_the_json_stream(tmp_path: Path) -> None:
    project, home = make_project(tmp_path / "project"), tmp_path / "home"
    (home).mkdir()
    (home / "config.json").write_text(json.dumps({"loop": {"noticeAfter": 2, "stopAfter": 4}}))
    script = write_script(tmp_path / "loop.json", [READ] * 8)

    ran = run_loom("run", "--json", "--model", f"scripted:{script}", "check the README", cwd=project, home=home)

    assert ran.returncode == EXIT_FAILED, ran
    events = ran.events()
    loops = [e for e in events if isinstance(e, LoopDetected)]
    assert [(e.action, e.repeats) for e in loops] == [("notice", 2), ("notice", 3), ("stop", 4)], ran
    assert loops[0].calls == ['fs__read({"path":"README.md"})'] and "[Loom] Loop detected" in loops[0].note
    (finished,) = [e for e in events if isinstance(e, RunFinished)]
    assert finished.status == "failed" and finished.reason.startswith('loop: fs__read({"path":"README.md"}) repeated 4')
