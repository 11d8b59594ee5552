"""`loom sessions`: a STATUS column, titles given with `loom sessions rename`, and no escape sequence ever printed."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest

from orchestrator.home import DB_NAME
from tests.clients.cli_support import make_project, run_loom, write_script

pytestmark = pytest.mark.timeout(120)


def test_sessions_are_renamed_listed_with_status_and_title_and_archived(tmp_path: Path) -> None:
    project, home = make_project(tmp_path / "p"), tmp_path / "home"
    ok = write_script(tmp_path / "ok.json", [{"text": "fine"}])
    bad = write_script(tmp_path / "bad.json", [{"error": "permanent:no"}])
    assert run_loom("run", "--model", f"scripted:{ok}", "one", cwd=project, home=home).returncode == 0
    assert run_loom("run", "--model", f"scripted:{bad}", "two", cwd=project, home=home).returncode != 0
    before = run_loom("sessions", cwd=project, home=home)
    failed_row, ok_row = before.stdout.splitlines()[1:]  # newest first
    failed_id, ok_id = failed_row.split()[0], ok_row.split()[0]

    renamed = run_loom("sessions", "rename", ok_id, "\x1b]0;owned\x07the\nfirst one", cwd=project, home=home)
    # Another writer of the database (not the face) cannot get an escape sequence printed either.
    with contextlib.closing(sqlite3.connect(home / DB_NAME)) as conn, conn:
        conn.execute("UPDATE sessions SET title=? WHERE id=?", ("\x1b[2Jraw\x9b1m", failed_id))
    titled = run_loom("sessions", cwd=project, home=home)
    archived = run_loom("sessions", "archive", ok_id, cwd=project, home=home)
    after = run_loom("sessions", cwd=project, home=home)
    every = run_loom("sessions", "--all", cwd=project, home=home)

    assert before.stdout.splitlines()[0].split() == ["SESSION", "STATUS", "MODE", "MODEL", "CTX", "CWD"]
    assert failed_row.split()[1] == "failed" and ok_row.split()[1] == "idle", before.stdout
    assert renamed.returncode == 0 and "titled ']0;ownedthe first one'" in renamed.stderr, renamed
    header, first, second = titled.stdout.splitlines()
    assert header.split() == ["SESSION", "STATUS", "MODE", "MODEL", "TITLE", "CTX", "CWD"]
    assert "[2Jraw1m" in first and "]0;ownedthe first one" in second, titled.stdout
    assert "\x1b" not in titled.stdout and "\x9b" not in titled.stdout and "\x07" not in titled.stdout
    assert archived.returncode == 0, archived
    assert ok_id not in after.stdout and failed_id in after.stdout
    assert ok_id in every.stdout and "(archived)" in every.stdout
