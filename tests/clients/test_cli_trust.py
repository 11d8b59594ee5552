"""``loom trust`` and the question ``loom run`` asks at a terminal, with the real command on a real pty."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import time
from pathlib import Path

import pytest

from tests.clients.cli_support import clean_env, loom_command, make_project, run_loom, write_script

PROMPT = b"[y/N] "


def untrusted_project(tmp_path: Path) -> Path:
    project = make_project(tmp_path / "project")
    (project / ".loom").mkdir()
    (project / ".loom" / "config.json").write_text(json.dumps({"shell": {"sandbox": "off"}}), encoding="utf-8")
    write_script(project / "s.json", [{"text": "done"}])
    return project


def run_at_terminal(project: Path, home: Path, answer: bytes) -> tuple[int, str]:
    """``loom run`` with stdin and stderr on a pty; answer the question once it is asked."""
    main, secondary = pty.openpty()
    proc = subprocess.Popen(
        [*loom_command(), "run", "--model", "scripted:s.json", "go"],
        cwd=project,
        env=clean_env(home),
        stdin=secondary,
        stderr=secondary,
        stdout=subprocess.PIPE,
    )
    os.close(secondary)
    seen = b""
    deadline = time.monotonic() + 30
    try:
        while PROMPT not in seen and time.monotonic() < deadline and proc.poll() is None:
            ready, _, _ = select.select([main], [], [], 0.2)
            if ready:
                seen += os.read(main, 4096)
        assert PROMPT in seen, seen.decode(errors="replace")
        os.write(main, answer)
        proc.wait(timeout=30)
        with_rest = seen
        while True:
            ready, _, _ = select.select([main], [], [], 0.2)
            if not ready:
                break
            try:
                chunk = os.read(main, 4096)
            except OSError:
                break
            if not chunk:
                break
            with_rest += chunk
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(main)
        if proc.stdout is not None:
            proc.stdout.close()
    return proc.returncode, with_rest.decode(errors="replace")


@pytest.mark.parametrize(("answer", "trusted"), [(b"y\n", True), (b"\n", False)])
def test_loom_run_at_a_terminal_asks_before_using_an_untrusted_config(
    tmp_path: Path, answer: bytes, trusted: bool
) -> None:
    project, home = untrusted_project(tmp_path), tmp_path / "home"
    code, screen = run_at_terminal(project, home, answer)
    assert code == 0, screen
    assert "sandbox 'off'" in screen and '"sandbox": "off"' in screen, screen  # what it wants, and the file
    shown = run_loom("trust", "--show", cwd=project, home=home)
    assert (": trusted" in shown.stdout) is trusted, shown
    if not trusted:
        assert "not trusted; running without it" in screen, screen


def test_without_a_terminal_nothing_is_asked_and_the_run_goes_on_without_it(tmp_path: Path) -> None:
    project, home = untrusted_project(tmp_path), tmp_path / "home"
    result = run_loom("run", "--model", "scripted:s.json", "go", cwd=project, home=home)
    assert result.returncode == 0, result
    assert "[y/N]" not in result.stderr
    assert "loom: warning:" in result.stderr and "loom trust" in result.stderr, result


def test_loom_trust_revoke_and_a_project_with_nothing_to_trust(tmp_path: Path) -> None:
    project, home = untrusted_project(tmp_path), tmp_path / "home"
    assert "trusted (sha256" in run_loom("trust", str(project), cwd=tmp_path, home=home).stdout
    assert "no longer trusted" in run_loom("trust", "--revoke", cwd=project, home=home).stdout
    plain = tmp_path / "plain"
    plain.mkdir()
    assert "nothing to trust" in run_loom("trust", cwd=plain, home=home).stdout
    bad = run_loom("trust", str(tmp_path / "missing"), cwd=tmp_path, home=home)
    assert bad.returncode == 2 and "is not a directory" in bad.stderr, bad
