"""A full disk, or a read-only one, under a real ``loom run`` (issue 5).

``LOOM_HOME`` lives on a 2 MiB tmpfs mounted for the test (root only; skipped with the mount's error
otherwise). For the full disk, a first run completes, then a filler file leaves too little room for a
second run whose steps read a large file, so that its writes fail midway with ENOSPC (SQLITE_FULL).
The run must fail with a plain message that names the problem and what to do, exit 1 without a
traceback; after the space is freed, the database must pass ``PRAGMA integrity_check``, the first run
must export exactly as before, every event the failed run had printed must be stored as printed,
and the home must take new runs. For the read-only disk, the same tmpfs is remounted read-only.

The store-level cases (a database opened read-only, SQLITE_FULL simulated with ``max_page_count``)
are in tests/servers/test_checkpoints.py and tests/orchestrator/store/test_checkpoint_store.py; these run
the whole CLI on a real filesystem.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.events import Event, RunStarted, event_run_id
from orchestrator.home import DB_NAME
from tests.clients.cli_support import CliResult, make_project, parse_events, run_loom, write_script

MOUNT_TIMEOUT_S = 10.0
DISK = "size=2m"
HEADROOM = 400 * 1024
"""Free space left on the disk for the second run: room to start and store a step or so, not to finish."""
BIG_FILE_BYTES = 120 * 1024


def _mount(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["mount", *args], capture_output=True, text=True, timeout=MOUNT_TIMEOUT_S, check=False)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A fresh 2 MiB tmpfs, unmounted afterwards."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = _mount("-t", "tmpfs", "-o", DISK, "tmpfs", str(mount))
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {done.stderr.strip() or done.returncode}")
    try:
        yield mount
    finally:
        umount = ["umount", str(mount)]
        if subprocess.run(umount, capture_output=True, timeout=MOUNT_TIMEOUT_S, check=False).returncode != 0:
            subprocess.run(["umount", "-l", str(mount)], capture_output=True, timeout=MOUNT_TIMEOUT_S, check=False)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = make_project(tmp_path / "project")
    line = "All work and no play makes Jack a dull boy.\n"
    (root / "big.txt").write_text(line * (BIG_FILE_BYTES // len(line)), encoding="utf-8")
    return root


def _run_id(result: CliResult) -> str:
    return next(e.run_id for e in result.events() if isinstance(e, RunStarted))


def _printed(text: str) -> list[Event]:
    """The events a run printed (``--json``), up to its last complete line."""
    complete = text[: text.rfind("\n") + 1]
    return parse_events(complete) if complete else []


def _integrity(db: Path) -> str:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])


def _fill(disk: Path, leave: int) -> Path:
    stat = os.statvfs(disk)
    free = stat.f_bavail * stat.f_frsize
    assert free > leave, f"the disk has only {free} bytes free before filling"
    filler = disk / "filler"
    filler.write_bytes(b"\0" * (free - leave))
    return filler


def test_a_full_disk_fails_the_run_plainly_and_loses_nothing_stored(small_disk: Path, project: Path) -> None:
    home = small_disk / "home"
    write_script(
        project / "first.json",
        [
            {"text": "Reading.", "tool_calls": [{"name": "fs__read", "arguments": {"path": "README.md"}}]},
            {"text": "Ok."},
        ],
    )
    first = run_loom("run", "--json", "--model", "scripted:first.json", "first run", cwd=project, home=home)
    assert first.returncode == 0, first
    first_id = _run_id(first)
    before = run_loom("export", first_id, cwd=project, home=home)
    assert before.returncode == 0 and before.stdout, before

    read_big = {"text": "Reading the big file.", "tool_calls": [{"name": "fs__read", "arguments": {"path": "big.txt"}}]}
    write_script(project / "big.json", [read_big] * 8 + [{"text": "Read it all."}])
    filler = _fill(small_disk, HEADROOM)
    failed = run_loom("run", "--json", "--model", "scripted:big.json", "second run", cwd=project, home=home)

    assert failed.returncode == 1, failed
    assert "Traceback" not in failed.stderr, failed
    errors = [line for line in failed.stderr.splitlines() if line.startswith("loom: error: ")]
    assert len(errors) == 1, failed
    assert str(home / DB_NAME) in errors[0], failed
    assert "the disk is full; free some space and try again" in errors[0], failed
    printed = _printed(failed.stdout)
    failed_id = next(e.run_id for e in printed if isinstance(e, RunStarted))
    steps_done = [e.type for e in printed].count("tool_call_finished")
    assert steps_done >= 1, f"the run should fail midway, not at its start: {[e.type for e in printed]}"

    filler.unlink()
    assert _integrity(home / DB_NAME) == "ok"
    after = run_loom("export", first_id, cwd=project, home=home)
    assert after.returncode == 0, after
    assert after.stdout == before.stdout
    stored = run_loom("export", failed_id, cwd=project, home=home)
    assert stored.returncode == 0, stored
    stored_events = stored.events()
    run_printed = [e for e in printed if event_run_id(e) == failed_id and e.seq is not None]  # not live deltas
    assert stored_events[: len(run_printed)] == run_printed, "every event printed before the failure is stored"
    again = run_loom("run", "--model", "scripted:first.json", "after freeing space", cwd=project, home=home)
    assert again.returncode == 0, again
    assert _integrity(home / DB_NAME) == "ok"


def test_a_read_only_disk_fails_the_run_plainly_and_loses_nothing(small_disk: Path, project: Path) -> None:
    home = small_disk / "home"
    write_script(project / "hello.json", [{"text": "Hello."}])
    first = run_loom("run", "--json", "--model", "scripted:hello.json", "first run", cwd=project, home=home)
    assert first.returncode == 0, first
    first_id = _run_id(first)
    before = run_loom("export", first_id, cwd=project, home=home)
    assert before.returncode == 0 and before.stdout, before

    remounted = _mount("-o", "remount,ro", str(small_disk))
    assert remounted.returncode == 0, remounted.stderr
    try:
        refused = run_loom("run", "--model", "scripted:hello.json", "second run", cwd=project, home=home)
    finally:
        assert _mount("-o", "remount,rw", str(small_disk)).returncode == 0

    assert refused.returncode == 1, refused
    assert "Traceback" not in refused.stderr, refused
    errors = [line for line in refused.stderr.splitlines() if line.startswith("loom: error: ")]
    assert len(errors) == 1, refused
    assert str(home / DB_NAME) in errors[0], refused
    assert "the filesystem holding it is mounted read-only" in errors[0], refused
    assert _integrity(home / DB_NAME) == "ok"
    after = run_loom("export", first_id, cwd=project, home=home)
    assert after.returncode == 0 and after.stdout == before.stdout, after
