"""The daemon stops under an open TUI and comes back: the TUI says so, keeps what it shows, and continues."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from clients.tui.user_message import UserMessageBlock
from tests.clients.cli_support import make_project, write_script
from tests.clients.tui.support import SIZE, connected, tui, type_message, until
from tests.orchestrator.daemon.daemon_process import start_daemon

pytestmark = pytest.mark.timeout(150)


def test_the_tui_reconnects_from_its_cursor_when_the_daemon_comes_back(tmp_path: Path) -> None:
    project, home = make_project(tmp_path / "p"), tmp_path / "home"
    # A scripted model's place in its script lives in the daemon's process: the new daemon starts it again.
    script = write_script(tmp_path / "s.json", [{"text": "answer"}])
    model = f"scripted:{script}"
    daemon = start_daemon(home, tmp_path)

    async def drive() -> list[str]:
        nonlocal daemon
        app = tui(home, project, model)
        async with app.run_test(size=SIZE) as pilot:
            await connected(pilot)
            await type_message(pilot, "first")
            await until(pilot, lambda: app.status.run == "completed", "the first run")
            await anyio.to_thread.run_sync(daemon.stop)
            await until(pilot, lambda: app.status.connection == "disconnected", "the TUI to notice", 60)
            (kept,) = app.conversation.texts  # what it showed stays
            assert kept.source == "answer"
            daemon = await anyio.to_thread.run_sync(lambda: start_daemon(home, tmp_path, log_name="again"))
            await connected(pilot)
            await type_message(pilot, "second")
            await until(pilot, lambda: len(app.conversation.texts) == 2, "the second answer")
            await until(pilot, lambda: app.status.run == "completed", "the second run")
            assert app.conversation.texts[0] is kept
            users = [b.text for b in app.conversation.query(UserMessageBlock)]
            assert users == ["first", "second"]
            return [t.source for t in app.conversation.texts]

    try:
        assert anyio.run(drive) == ["answer", "answer"]  # nothing doubled, nothing missing
    finally:
        if daemon.proc.poll() is None:
            daemon.stop()
