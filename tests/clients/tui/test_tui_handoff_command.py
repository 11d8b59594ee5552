"""``/handoff`` against a real daemon: the session's scripted model writes the handoff in its blocks, and the TUI
moves to the fresh session, saying so; the old session is archived."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from clients.loom import LoomClient
from clients.loom.daemon import connect
from orchestrator.context.handoff import BLOCKS
from tests.clients.tui.support import connected, tui, type_message, until
from tests.clients.tui.test_tui_goal_command import notices
from tests.orchestrator.daemon.daemon_process import running_daemon

pytestmark = pytest.mark.timeout(120)

INSTRUCTION = "Keep every line under 80 columns."


def handoff_script(path: Path) -> str:
    blocks = dict.fromkeys(BLOCKS, "none")
    blocks["Goal and constraints"] = f'- "{INSTRUCTION}"'
    blocks["Next step"] = "- run the tests"
    summary = "\n\n".join(f"## {name}\n{body}" for name, body in blocks.items())
    path.write_text(json.dumps({"turns": [{"text": "Noted."}], "summaries": [{"text": summary}]}))
    return f"scripted:{path}"


async def handed_off(home: Path, work: Path, model: str) -> tuple[str, str, list[str], bool]:
    """The old session, the one shown after /handoff, its notices, and whether the old one is archived."""
    app = tui(home, work, model)
    async with app.run_test(size=(120, 30)) as pilot:
        await connected(pilot)
        await type_message(pilot, INSTRUCTION)
        await until(pilot, lambda: app.status.run == "completed", "the first run")
        old = app.session_id
        assert old is not None
        await type_message(pilot, "/handoff start with the failing test")
        await until(pilot, lambda: app.session_id != old, "the fresh session", 60)
        fresh = app.session_id
        assert fresh is not None
        await until(pilot, lambda: any("from its handoff" in n for n in notices(app)), "the fresh session's start")
        said = notices(app)
    async with connect(home) as session:
        archived = (await LoomClient(session, on_daemon=True).get_session(old)).archived
    return old, fresh, said, archived


def test_handoff_moves_to_the_fresh_session_and_says_so(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    model = handoff_script(tmp_path / "session.json")
    with running_daemon(home, tmp_path):
        old, fresh, said, archived = anyio.run(handed_off, home, work, model)
    assert fresh != old and archived
    assert any(
        n.startswith(f"handed off: the fresh session {fresh} starts from {old}'s handoff, with what you added word")
        for n in said
    ), said
    assert f"this session continues {old} from its handoff (the old one is archived)" in said
