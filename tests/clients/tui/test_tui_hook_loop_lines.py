"""Hooks and loops in the conversation, through a real daemon: what a hook did that matters, and a loop stopped.

``$LOOM_HOME/hooks.json`` (the user's hooks, no trust needed) with a PreToolUse hook that blocks ``shell__run``
(exit 2), one that rewrites ``fs__read``'s path, one that crashes on ``fs__glob`` and one with nothing to say on
``fs__list``; a scripted model calls each. Then a scripted model that reads the same file again and again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from clients.tui.notice_line import NoticeLine
from tests.clients.cli_support import make_project, write_script
from tests.clients.tui.support import SIZE, connected, tui, type_message, until
from tests.orchestrator.daemon.daemon_process import running_daemon

pytestmark = pytest.mark.timeout(120)

REWRITE = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "updatedInput": {"path": "main.py"}}}


def hooks(home: Path) -> None:
    def on(matcher: str, command: str) -> dict[str, Any]:
        return {"matcher": matcher, "hooks": [{"type": "command", "command": command, "timeout": 10}]}

    home.mkdir(parents=True, exist_ok=True)
    pre = [
        on("shell__run", "echo 'no shell here' >&2; exit 2"),
        on("fs__read", f"echo '{json.dumps(REWRITE)}'"),
        on("fs__glob", "echo 'Traceback: boom' >&2; exit 3"),
        on("fs__list", "exit 0"),
    ]
    (home / "hooks.json").write_text(json.dumps({"hooks": {"PreToolUse": pre}}))


async def lines_of(home: Path, work: Path, model: str, until_text: str) -> list[tuple[str, str]]:
    """Each notice line of the run (text, level) once one says ``until_text``."""
    app = tui(home, work, model, mode="bypass")
    async with app.run_test(size=SIZE) as pilot:
        await connected(pilot)
        await type_message(pilot, "go")

        def shown() -> list[tuple[str, str]]:
            return [
                (n.text, next(c for c in n.classes if c.startswith("-"))) for n in app.conversation.query(NoticeLine)
            ]

        await until(pilot, lambda: any(until_text in t for t, _ in shown()), until_text, 60)
        await until(pilot, lambda: app.status.run in ("completed", "failed"), "the run's end")
        return shown()


def test_hooks_that_block_rewrite_or_fail_are_lines_and_one_with_nothing_to_say_is_not(tmp_path: Path) -> None:
    work, home = make_project(tmp_path / "work"), tmp_path / "home"
    hooks(home)
    turns: list[dict[str, Any]] = [
        {
            "tool_calls": [
                {"name": "shell__run", "arguments": {"command": "ls"}},
                {"name": "fs__read", "arguments": {"path": "README.md"}},
                {"name": "fs__glob", "arguments": {"pattern": "*.py"}},
                {"name": "fs__list", "arguments": {}},
            ]
        },
        {"text": "Done."},
    ]
    model = f"scripted:{write_script(tmp_path / 'calls.json', turns)}"
    with running_daemon(home, tmp_path):
        lines = anyio.run(lines_of, home, work, model, "fs__glob")
    hook_lines = sorted(line for line in lines if line[0].startswith("hook "))
    assert len(hook_lines) == 3, lines  # the hook on fs__list had nothing to say: no line
    failed, rewrote, blocked = hook_lines
    assert failed[1] == "-error" and failed[0].startswith("hook PreToolUse on fs__glob failed (exited 3): ")
    assert "Traceback: boom" in failed[0] and '"onError": "allow"' in failed[0], failed
    assert rewrote[1] == "-warning" and rewrote[0].startswith(
        "hook PreToolUse on fs__read rewrote the call's arguments"
    )
    assert blocked == (
        "hook PreToolUse on shell__run blocked it: no shell here (echo 'no shell here' >&2; exit 2)",
        "-warning",
    )
    assert not any("fs__list" in text for text, _ in lines)


def test_a_run_that_loops_is_told_then_stopped_and_its_end_says_why(tmp_path: Path) -> None:
    work, home = make_project(tmp_path / "work"), tmp_path / "home"
    read = {"name": "fs__read", "arguments": {"path": "README.md"}}
    model = f"scripted:{write_script(tmp_path / 'loop.json', [{'tool_calls': [read]}] * 8)}"
    with running_daemon(home, tmp_path):
        lines = anyio.run(lines_of, home, work, model, "run failed")
    call = 'fs__read({"path":"README.md"})'
    looped = [line for line in lines if "loop" in line[0]]
    assert looped[0] == (
        f"loop: {call} came round 3 times in a row (step 3); the model was told to change course",
        "-warning",
    )
    assert looped[-2] == (f"loop: {call} came round 5 times in a row (step 5); the run is stopped", "-error")
    assert looped[-1][0].startswith(f"run failed: loop: {call}") and looped[-1][1] == "-error"
