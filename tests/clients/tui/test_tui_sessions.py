"""The sessions panel: status from the daemon ("needs you" first, failed shown), rename and archive from the keys."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from textual.widgets import Input

from clients.loom import LoomClient
from clients.loom.daemon import connect
from clients.tui.session_dialogs import ConfirmArchive, RenameDialog
from clients.tui.sessions_panel import NEEDS_YOU_HEADER, SessionsPanel
from tests.clients.cli_support import make_project, write_script
from tests.clients.tui.support import connected, tui, until
from tests.orchestrator.daemon.daemon_process import running_daemon

pytestmark = pytest.mark.timeout(120)

WIDE = (160, 48)
"""Wide enough that the sessions panel shows from the start."""


async def three_sessions(home: Path, project: Path, writes: str, fails: str) -> tuple[str, str, str]:
    """One waiting for an approval, one whose run failed, one idle: made by a client of our own, not the TUI."""
    async with connect(home) as session:
        loom = LoomClient(session, on_daemon=True)
        waiting = await loom.create_session(str(project), model=writes, mode="ask")
        failed = await loom.create_session(str(project), model=fails, mode="ask")
        idle = await loom.create_session(str(project), model=fails, mode="ask")
        assert (await loom.send_message(waiting.session_id, "write", wait_s=10)).status == "awaiting_approval"
        assert (await loom.send_message(failed.session_id, "fail", wait_s=10)).status == "failed"
        return waiting.session_id, failed.session_id, idle.session_id


async def titles_and_archived(home: Path) -> dict[str, tuple[str, bool]]:
    async with connect(home) as session:
        listed = await LoomClient(session, on_daemon=True).list_sessions(include_archived=True)
    return {s.session_id: (s.title, s.archived) for s in listed}


def title_of(panel: SessionsPanel, session_id: str) -> str:
    session = panel.session(session_id)
    return session.title if session is not None else ""


def prompts(panel: SessionsPanel) -> list[str]:
    return [str(panel.get_option_at_index(i).prompt) for i in range(panel.option_count)]


async def drive(home: Path, project: Path, ids: tuple[str, str, str]) -> dict[str, tuple[str, bool]]:
    waiting, failed, idle = ids
    app = tui(home, project, "scripted:unused.json")
    async with app.run_test(size=WIDE) as pilot:
        await connected(pilot)
        panel = app.query_one(SessionsPanel)
        await until(pilot, lambda: len(panel.sessions) == 3, "the three sessions in the panel")

        shown = prompts(panel)
        assert shown[0] == NEEDS_YOU_HEADER and panel.get_option_at_index(0).disabled
        assert panel.get_option_at_index(1).id == waiting and "approval" in shown[1]
        by_id = {panel.get_option_at_index(i).id: text for i, text in enumerate(shown)}
        assert "failed" in by_id[failed] and "idle" in by_id[idle]

        panel.focus()
        panel.highlighted = panel.get_option_index(idle)
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, RenameDialog), "the rename dialog")
        app.screen.query_one(Input).value = "fix the \x1b[2Jbuild"
        await pilot.press("enter")
        await until(pilot, lambda: title_of(panel, idle) == "fix the [2Jbuild", "the new title")
        assert "fix the [2Jbuild" in prompts(panel)[panel.get_option_index(idle)]

        await pilot.press("x")
        await until(pilot, lambda: isinstance(app.screen, ConfirmArchive), "the archive question")
        await pilot.press("n")  # kept: nothing is archived without a yes
        await pilot.pause(0.2)
        assert panel.session(idle) is not None
        await pilot.press("x")
        await until(pilot, lambda: isinstance(app.screen, ConfirmArchive), "the archive question again")
        await pilot.press("y")
        await until(pilot, lambda: panel.session(idle) is None, "the archived session to leave the list")
        assert len(panel.sessions) == 2
    return await titles_and_archived(home)


def test_the_panel_puts_waiting_sessions_first_shows_failures_and_renames_and_archives_from_the_keys(
    tmp_path: Path,
) -> None:
    project, home = make_project(tmp_path / "p"), tmp_path / "home"
    writes = write_script(
        tmp_path / "w.json",
        [{"text": "Writing.", "tool_calls": [{"name": "fs__write", "arguments": {"path": "a", "content": "A"}}]}],
    )
    fails = write_script(tmp_path / "f.json", [{"error": "permanent:the provider said no"}])
    with running_daemon(home, tmp_path):
        ids = anyio.run(three_sessions, home, project, f"scripted:{writes}", f"scripted:{fails}")
        stored = anyio.run(drive, home, project, ids)
    _, _, idle = ids
    assert stored[idle] == ("fix the [2Jbuild", True)  # the escape never reached the store, let alone the screen
