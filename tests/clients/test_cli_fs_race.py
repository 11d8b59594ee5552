"""The check-then-open race against the real ``loom run``: a directory swapped with a symlink to outside.

A process exchanges ``sub`` (a real directory of the workspace) with ``swap`` (a symlink to a directory
outside it) as fast as it can, while a scripted model makes 200 reads, writes, edits and listings through
``sub``. Before issue 11 such runs read and overwrote the outside files; now every call either works inside the
workspace or says the path changed, and nothing outside is read, changed or created.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from orchestrator.events import ToolCallFinished
from tests.clients.cli_support import run_loom, write_script
from tests.servers.test_fs_race import MARKER, Swapper

ROUNDS = 40


def test_a_swap_race_during_a_real_run_never_escapes_the_workspace(tmp_path: Path) -> None:
    project, outside = tmp_path / "project", tmp_path / "outside"
    (project / "sub").mkdir(parents=True)
    outside.mkdir()
    (project / "sub" / "a.txt").write_text("common\n")
    for name in ("a.txt", "secret.txt"):
        (outside / name).write_text(f"common\n{MARKER}\n")
    os.symlink(outside, project / "swap")
    before = {p.name: p.read_bytes() for p in outside.iterdir()}
    calls: list[dict[str, Any]] = []
    for i in range(ROUNDS):
        calls += [
            {"name": "fs__read", "arguments": {"path": "sub/secret.txt"}},
            {"name": "fs__read", "arguments": {"path": "sub/a.txt"}},
            {"name": "fs__write", "arguments": {"path": f"sub/new-{i}.txt", "content": "new\n"}},
            {"name": "fs__edit", "arguments": {"path": "sub/a.txt", "old": "common", "new": "common"}},
            {"name": "fs__grep", "arguments": {"pattern": "OUTSIDE", "path": "sub"}},
        ]
    script = write_script(tmp_path / "race.json", [{"tool_calls": calls[i : i + 25]} for i in range(0, len(calls), 25)])
    swapper = Swapper(project / "sub", project / "swap")
    try:
        result = run_loom(
            "run", "--json", "--max-steps", "20", "--model", f"scripted:{script}", "race", cwd=project,
            home=tmp_path / "home", timeout_s=120,
        )  # fmt: skip
    finally:
        swaps = swapper.stop()
    assert result.returncode in (0, 1), result  # the script ends without a final answer: max steps or done
    finished = [e for e in result.events() if isinstance(e, ToolCallFinished)]
    assert len(finished) == len(calls), result
    assert swaps > len(calls), swaps
    for done in finished:
        assert MARKER not in done.content, done
    assert {p.name: p.read_bytes() for p in outside.iterdir()} == before  # nothing outside changed or created
    assert any(not done.is_error for done in finished)  # the tools kept working inside the workspace
