"""``loom run`` prints a loop for a person: noticed, then stopped, and the run's end gives the reason.

The real ``loom`` in a subprocess, scripted models; ``--json`` carries the same events whole.
"""

from __future__ import annotations

from pathlib import Path

from orchestrator.events_long import LoopDetected
from tests.clients.cli_support import make_project, run_loom, write_script

READ = {"name": "fs__read", "arguments": {"path": "README.md"}}


def test_a_run_that_loops_is_told_then_stopped_and_the_reason_is_printed(tmp_path: Path) -> None:
    project, home = make_project(tmp_path / "project"), tmp_path / "home"
    model = f"scripted:{write_script(tmp_path / 'loop.json', [{'tool_calls': [READ]}] * 8)}"
    result = run_loom("run", "--model", model, "read the readme", cwd=project, home=home)
    said = [line for line in result.stderr.splitlines() if "loop" in line]
    assert result.returncode != 0, result
    call = 'fs__read({"path":"README.md"})'
    assert said[0] == (
        f"loom: warning: loop: {call} came round 3 times in a row (step 3); the model was told to change course"
    ), result.stderr
    assert said[-2].startswith(f"loom: error: loop: {call} came round 5 times in a row"), result.stderr
    assert said[-2].endswith("the run is stopped")
    assert said[-1].startswith("loom: run ") and " failed after 5 steps: loop: " in said[-1], result.stderr

    streamed = run_loom("run", "--json", "--model", model, "read the readme", cwd=project, home=home)
    loops = [e for e in streamed.events() if isinstance(e, LoopDetected)]
    assert [(e.action, e.repeats) for e in loops][-1] == ("stop", 5)
