"""Loom's home and the files in it are private to the user, from every entry point (issue 12).

The event log holds every prompt and every file the model read: ``loom run`` and ``loom mcp`` used to create
``$LOOM_HOME`` 0755 and ``loom.db`` 0644, readable by every user of the machine.
"""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.clients.cli_support import (
    clean_env,
    loom_command,
    make_project,
    run_loom,
    stdio_test_server,
    write_config,
    write_script,
)


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture(autouse=True)
def permissive_umask() -> Iterator[None]:
    old = os.umask(0o022)  # the common default, under which files are created world-readable
    yield
    os.umask(old)


def test_loom_run_creates_a_private_home(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    home = tmp_path / "home"
    write_config(project / "servers.json", {"ext": stdio_test_server()})  # a stdio server: it gets a log file
    script = write_script(project / "s.json", [{"text": "hi"}])
    result = run_loom("run", "--config", "servers.json", "--model", f"scripted:{script}", "go", cwd=project, home=home)
    assert result.returncode == 0, result
    assert mode(home) == 0o700
    for name in ("loom.db", "memory.db", "logs/ext.log"):
        assert mode(home / name) == 0o600, name
    assert mode(home / "logs") == 0o700
    for extra in home.glob("*.db-*"):
        assert mode(extra) == 0o600, extra


def test_loom_mcp_creates_a_private_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    done = subprocess.run(
        [*loom_command(), "mcp"], cwd=tmp_path, env=clean_env(home), input="", capture_output=True, timeout=60,
        text=True, check=False,
    )  # fmt: skip
    assert (home / "loom.db").exists(), done
    assert mode(home) == 0o700 and mode(home / "loom.db") == 0o600


def test_a_home_an_older_loom_left_readable_is_made_private(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    home = tmp_path / "home"
    first = run_loom("run", "--model", f"scripted:{write_script(project / 's.json', [{'text': 'hi'}])}", "go",
                     cwd=project, home=home)  # fmt: skip
    assert first.returncode == 0, first
    os.chmod(home, 0o755)  # as Loom before issue 12 made them
    os.chmod(home / "loom.db", 0o644)
    os.chmod(home / "memory.db", 0o644)

    again = run_loom("run", "--model", "scripted:s.json", "go", cwd=project, home=home)

    assert again.returncode == 0, again
    assert (mode(home), mode(home / "loom.db"), mode(home / "memory.db")) == (0o700, 0o600, 0o600)
    assert (
        f"made Loom's home private (it holds every session's prompts and files): {home} 0755 -> 0700, " in again.stderr
    )
    assert again.stderr.count("made Loom's home private") == 1, again
