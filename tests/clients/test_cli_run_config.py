"""Config reaches the built-in servers of a ``loom run``: the shell's sandbox options and tool timeouts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from orchestrator.events import ToolCallFinished, ToolCallStarted
from tests.clients.cli_support import run_loom, write_script

TURNS: list[dict[str, Any]] = [
    {
        "text": "running",
        "tool_calls": [
            {"id": "echo", "name": "shell__run", "arguments": {"command": "echo hello"}},
            {"id": "slow", "name": "shell__run", "arguments": {"command": "sleep 20"}},
        ],
    },
    {"text": "done"},
]


def _finished(events: list[Any], command: str) -> ToolCallFinished:
    """The result of the shell call whose command starts with ``command``."""
    (call_id,) = [
        e.call_id for e in events if isinstance(e, ToolCallStarted) and e.arguments["command"].startswith(command)
    ]
    (done,) = [e for e in events if isinstance(e, ToolCallFinished) and e.call_id == call_id]
    return done


def test_shell_options_and_tool_timeouts_from_the_project_config(tmp_path: Path) -> None:
    (tmp_path / ".loom").mkdir()
    config = {"shell": {"sandbox": "off"}, "toolTimeouts": {"shell__run": 1}}
    (tmp_path / ".loom" / "config.json").write_text(json.dumps(config), encoding="utf-8")
    script = write_script(tmp_path / "s.json", TURNS)
    # Turning the sandbox off loosens it: that part waits for `loom trust`; the timeout applies at once.
    trusted = run_loom("trust", cwd=tmp_path, home=tmp_path / "h")
    assert trusted.returncode == 0 and "trusted" in trusted.stdout, trusted
    result = run_loom(
        "run", "--json", "--mode", "bypass", "--model", f"scripted:{script}", "go", cwd=tmp_path, home=tmp_path / "h"
    )
    assert result.returncode == 0, result
    events = result.events()
    echo, slow = _finished(events, "echo"), _finished(events, "sleep")
    assert "hello" in echo.content and "sandboxed" not in echo.content
    assert slow.failure == "timed_out" and slow.duration_ms < 10_000, slow


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap (Debian: bubblewrap) is not installed")
def test_by_default_the_shell_runs_in_the_sandbox_where_bwrap_works(tmp_path: Path) -> None:
    script = write_script(tmp_path / "s.json", [{"text": "x", "tool_calls": [TURNS[0]["tool_calls"][0]]}, TURNS[1]])
    result = run_loom(
        "run", "--json", "--mode", "bypass", "--model", f"scripted:{script}", "go", cwd=tmp_path, home=tmp_path / "h"
    )
    assert result.returncode == 0, result
    assert "sandboxed" in _finished(result.events(), "echo").content
