"""``loom rewind``: list a session's checkpoints, and rewind a ``loom run``'s file changes."""

from __future__ import annotations

from pathlib import Path

from orchestrator.events import RunFinished
from tests.clients.cli_support import run_loom, write_script


def test_rewind_lists_checkpoints_and_undoes_a_runs_file_changes(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("as it was\n")
    script = write_script(
        tmp_path / "s.json",
        [
            {
                "text": "changing",
                "tool_calls": [
                    {"name": "fs__write", "arguments": {"path": "made.txt", "content": "new"}},
                    {"name": "fs__edit", "arguments": {"path": "keep.txt", "old": "as it was", "new": "edited"}},
                    {"name": "shell__run", "arguments": {"command": "touch by-shell.txt"}},
                ],
            },
            {"text": "done"},
        ],
    )
    home = tmp_path / "home"
    ran = run_loom("run", "--json", "--mode", "bypass", "--model", f"scripted:{script}", "go", cwd=tmp_path, home=home)
    assert ran.returncode == 0, ran
    finished = ran.events()[-1]
    assert isinstance(finished, RunFinished)
    assert (tmp_path / "keep.txt").read_text() == "edited\n" and (tmp_path / "made.txt").exists()

    listed = run_loom("rewind", finished.session_id, cwd=tmp_path, home=home)
    done = run_loom("rewind", finished.session_id, "--to", finished.run_id, cwd=tmp_path, home=home)
    unknown = run_loom("rewind", finished.session_id, "--to", "r_nope", cwd=tmp_path, home=home)

    assert listed.returncode == 0, listed
    (line,) = listed.stdout.splitlines()
    assert line.startswith(finished.run_id) and "'go'" in line and "keep.txt" in line and "made.txt" in line
    assert done.returncode == 0, done
    assert (tmp_path / "keep.txt").read_text() == "as it was\n" and not (tmp_path / "made.txt").exists()
    assert (tmp_path / "by-shell.txt").exists()  # the shell's effect stays, and the user is told so
    assert "cannot be rewound" in done.stderr and "touch by-shell.txt" in done.stderr
    branch = done.stdout.splitlines()[-1]
    assert branch.startswith("s_") and branch != finished.session_id
    assert "restored  keep.txt" in done.stdout and "deleted   made.txt" in done.stdout
    assert unknown.returncode == 2 and "r_nope" in unknown.stderr, unknown
