"""A message sent while a run goes is shown as queued, then runs in its turn."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from clients.tui.user_message import UserMessageBlock
from tests.clients.cli_support import make_project, write_script
from tests.clients.tui.support import SIZE, connected, tui, type_message, until
from tests.orchestrator.daemon.daemon_process import running_daemon

pytestmark = pytest.mark.timeout(120)


async def drive(home: Path, project: Path, model: str) -> list[str]:
    app = tui(home, project, model)
    async with app.run_test(size=SIZE) as pilot:
        await connected(pilot)
        await type_message(pilot, "first")
        await until(pilot, lambda: app.status.run == "running", "the first run to start")
        await type_message(pilot, "second")
        await until(
            pilot,
            lambda: any(b.queued and b.text == "second" for b in app.conversation.query(UserMessageBlock)),
            "the second message to show as queued",
        )
        queued = next(b for b in app.conversation.query(UserMessageBlock) if b.queued)
        assert "(queued)" in str(queued.render())
        await until(pilot, lambda: [t.source for t in app.conversation.texts] == ["one", "two"], "both answers")
        await until(pilot, lambda: app.status.run == "completed", "the second run to finish")
        blocks = list(app.conversation.query(UserMessageBlock))
        assert not any(b.queued for b in blocks)
        return [str(getattr(w, "text", None) or getattr(w, "source", "")) for w in app.conversation.children]


def test_a_message_sent_during_a_run_is_queued_and_runs_next(tmp_path: Path) -> None:
    project, home = make_project(tmp_path / "p"), tmp_path / "home"
    script = write_script(tmp_path / "s.json", [{"text": "one", "delay_s": 2.0}, {"text": "two"}])
    with running_daemon(home, tmp_path):
        order = anyio.run(drive, home, project, f"scripted:{script}")
    assert order == ["first", "one", "second", "two"]
