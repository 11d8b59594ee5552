"""Pictures of the main screens (pytest-textual-snapshot), at 80×24 and 160×48, and one in the light theme.

The conversation's screens are built from fixed events fed to the conversation alone (``scenes``), with no
daemon: ids, times and ports would otherwise change every picture. The session list and the watermark are
pictures of the whole app, on a home where no daemon runs (so it says ``disconnected``), with a fixed session
list and watermark given to its panel and status line. Other parts of the app change the pictures on
purpose: regenerate them with ``pytest tests/clients/tui/test_tui_snapshots.py --snapshot-update`` and look
at the report before committing them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from clients.tui.app import LoomApp
from clients.tui.sessions_panel import SessionsPanel
from orchestrator.messages import ToolUseBlock
from orchestrator.protocol import Event, SessionInfo
from tests.clients.tui.scenes import (
    TS,
    ConversationApp,
    approval,
    assistant,
    child_activity,
    child_approval,
    child_finished,
    child_started,
    finished,
    settle,
    started,
    user,
)

pytestmark = pytest.mark.timeout(120)

SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((160, 48), id="160x48")]
SnapCompare = Callable[..., bool]

ANSWER = """# What I found

The **tool blocks** are rendered from their events:

- a name and short arguments
- a status, with its time
- the first lines of the result

```python
def answer() -> int:
    return 42
```
"""

EDIT = ToolUseBlock(
    id="c_edit",
    name="fs__edit",
    input={"path": "src/app.py", "old": "def main():\n    run()\n", "new": "def main() -> None:\n    run(fast=True)\n"},
)


def text_scene() -> list[Event]:
    return [user("r_1", "look around and tell me what the widgets are"), assistant("r_1", 0, ANSWER)]


def running_scene() -> list[Event]:
    call = ToolUseBlock(id="c_run", name="shell__run", input={"command": "pytest -q tests/"})
    # A start in the future shows "running 0s" however slow the machine is, so the picture does not move.
    return [
        user("r_1", "run the tests"),
        assistant("r_1", 0, "Running the tests.", call),
        started("r_1", 0, call, TS * 2),
    ]


def diff_scene() -> list[Event]:
    structured = {"path": "src/app.py", "replacements": 1, "first_line": 12, "bytes_written": 300}
    return [
        user("r_1", "type main"),
        assistant("r_1", 0, "Adding the annotation.", EDIT),
        started("r_1", 0, EDIT),
        finished("r_1", 0, EDIT, "replaced 1 occurrence in 'src/app.py' (first at line 12)", structured=structured),
        assistant("r_1", 1, "Done: `main` is typed."),
    ]


def approval_scene() -> list[Event]:
    return [user("r_1", "type main"), assistant("r_1", 0, "Adding the annotation.", EDIT), approval("r_1", EDIT)]


def children_scene() -> list[Event]:
    spawn = ToolUseBlock(id="c_spawn", name="subagents__spawn_many", input={"goals": ["review", "test", "docs"]})
    pytest_call = ToolUseBlock(id="c_pytest", name="shell__run", input={"command": "pytest -q"})
    # Starts in the future show "0:00" however slow the machine is, so the picture does not move.
    return [
        user("r_1", "review it, test it and find the docs"),
        assistant("r_1", 0, "Three children, in parallel.", spawn),
        started("r_1", 0, spawn, TS * 2),
        child_started("r_1", "s_1a2b3c4d5e6f", "reviewer", "Review the diff in src/\nthen list what is wrong", TS * 2),
        child_started("r_1", "s_9f8e7d6c5b4a", "tester", "Run the tests and say which fail", TS * 2),
        child_started("r_1", "s_0c0c0c0c0c0c", "", "Find where the docs say how to release"),
        child_activity("r_1", "s_1a2b3c4d5e6f", 2, "fs__read"),
        child_finished("r_1", "s_0c0c0c0c0c0c", "completed", answer="docs/release.md, section 2\nand RELEASING.md"),
        child_approval("r_1", "s_9f8e7d6c5b4a", pytest_call),
    ]


SCENES = {
    "text": text_scene,
    "running_tool": running_scene,
    "diff": diff_scene,
    "approval": approval_scene,
    "children": children_scene,
}


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("scene", list(SCENES))
def test_conversation_screens(snap_compare: SnapCompare, scene: str, size: tuple[int, int]) -> None:
    assert snap_compare(ConversationApp(SCENES[scene]()), terminal_size=size, run_before=_settled)


def test_a_diff_in_the_light_theme(snap_compare: SnapCompare) -> None:
    app = ConversationApp(diff_scene(), theme="textual-light")
    assert snap_compare(app, terminal_size=(80, 24), run_before=_settled)


async def _settled(pilot: Pilot[Any]) -> None:
    await settle(pilot)
    await pilot.pause(0.1)  # the app's own first refreshes (the status line, the footer) come after


def _session(
    n: int, status: str, ratio: float | None, title: str = "", parent: int = 0, agent: str = ""
) -> SessionInfo:
    return SessionInfo(
        session_id=f"s_0000000{n}",
        parent_session_id=f"s_0000000{parent}" if parent else "",
        agent=agent,
        cwd="/work/project",
        model="scripted:demo",
        mode="ask",
        archived=False,
        last_seq=10,
        status=status,
        title=title,
        context_used=None if ratio is None else int(ratio * 200_000),
        context_window=200_000,
        context_ratio=ratio,
    )


def _app(tmp_path: Path) -> LoomApp:
    return LoomApp(home=tmp_path / "home", cwd=Path("/work/project"), model="scripted:demo", autostart=False)


@pytest.mark.parametrize("size", SIZES)
def test_the_session_list_puts_a_session_that_needs_you_first(
    snap_compare: SnapCompare, tmp_path: Path, size: tuple[int, int]
) -> None:
    async def sessions(pilot: Pilot[Any]) -> None:
        app = pilot.app
        assert isinstance(app, LoomApp)
        panel = app.query_one(SessionsPanel)
        panel.display = True
        listed = [
            _session(1, "idle", 0.12, "refactor the parser"),
            _session(2, "awaiting_approval", 0.41, "write the docs"),
            _session(3, "running", 0.63),
        ]
        panel.show_sessions(listed, cwd="/work/project", waiting={"s_00000002"}, current="s_00000001")
        panel.focus()  # the prompt's cursor blinks: a picture with it focused differs from run to run
        await _settled(pilot)

    assert snap_compare(_app(tmp_path), terminal_size=size, run_before=sessions)


@pytest.mark.parametrize("size", SIZES)
def test_the_session_list_nests_children_under_their_parent(
    snap_compare: SnapCompare, tmp_path: Path, size: tuple[int, int]
) -> None:
    async def tree(pilot: Pilot[Any]) -> None:
        app = pilot.app
        assert isinstance(app, LoomApp)
        panel = app.query_one(SessionsPanel)
        panel.display = True
        listed = [  # newest first, as list_sessions gives them
            _session(6, "idle", None, parent=5, agent="helper"),
            _session(5, "awaiting_approval", 0.05, parent=1, agent="tester"),
            _session(4, "running", 0.10, parent=1, agent="reviewer"),
            _session(3, "idle", 0.30, "fix the parser"),
            _session(2, "idle", 0.02, parent=3, agent="scout"),
            _session(1, "running", 0.22, "review and test"),
        ]
        panel.show_sessions(listed, cwd="/work/project", current="s_00000001")
        panel.focus()
        await _settled(pilot)

    assert snap_compare(_app(tmp_path), terminal_size=size, run_before=tree)


@pytest.mark.parametrize("size", SIZES)
def test_the_watermark_past_the_threshold_is_red(
    snap_compare: SnapCompare, tmp_path: Path, size: tuple[int, int]
) -> None:
    async def watermark(pilot: Pilot[Any]) -> None:
        app = pilot.app
        assert isinstance(app, LoomApp)
        app.status.model, app.status.mode = "scripted:demo", "ask"
        app.status.threshold, app.status.ratio = 0.8, 0.86
        app.conversation.focus()  # the prompt's cursor blinks: a picture with it focused differs from run to run
        await _settled(pilot)

    assert snap_compare(_app(tmp_path), terminal_size=size, run_before=watermark)
