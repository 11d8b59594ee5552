"""A run started from the TUI streams into the conversation and ends with exactly the stored text."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from clients.tui.user_message import UserMessageBlock
from tests.clients.cli_support import make_project, write_script
from tests.clients.tui.support import SIZE, connected, stored_messages, tui, type_message, until
from tests.orchestrator.daemon.daemon_process import running_daemon

pytestmark = pytest.mark.timeout(120)

ANSWER = (
    "# Findings\n\n"
    + "\n\n".join(f"Paragraph {i}: the **widgets** are " + " ".join(f"w{i}_{j}" for j in range(12)) for i in range(8))
    + "\n\n- one\n- two\n"
)
SLOW = {"text": ANSWER, "chunk_chars": 12, "chunk_delay_s": 0.02}


async def drive(home: Path, project: Path, model: str) -> tuple[str, list[int], str]:
    app = tui(home, project, model)
    async with app.run_test(size=SIZE) as pilot:
        await connected(pilot)
        await type_message(pilot, "look around")
        await until(pilot, lambda: bool(app.conversation.texts), "text to start streaming")
        lengths: list[int] = []
        text = app.conversation.texts[0]
        while not text.settled.is_set():
            lengths.append(len(text.source))
            await pilot.pause(0.05)
        await until(pilot, lambda: app.status.run == "completed", "the run to finish")
        (user,) = app.conversation.query(UserMessageBlock)
        assert user.text == "look around"
        assert app.session_id is not None
        return app.session_id, lengths, text.source


def test_a_run_streams_into_the_conversation_and_shows_the_stored_text_exactly(tmp_path: Path) -> None:
    project, home = make_project(tmp_path / "p"), tmp_path / "home"
    script = write_script(tmp_path / "slow.json", [SLOW])
    with running_daemon(home, tmp_path):
        session_id, lengths, shown = anyio.run(drive, home, project, f"scripted:{script}")
        (stored,) = anyio.run(stored_messages, home, session_id)

    assert shown == stored.message.text == ANSWER
    partial = [n for n in lengths if 0 < n < len(ANSWER)]
    assert len(set(partial)) > 3, f"the text did not grow piece by piece: {lengths}"
