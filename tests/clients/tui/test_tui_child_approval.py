"""A child's approval, answered from a second client while the parent is shown in the TUI (a real daemon).

The parent's scripted model spawns a child (subagents__spawn) and waits for it; the child's scripted model writes a
file, which its ask mode (inherited from the parent) asks about. The parent's conversation shows the child's block
and a card saying whose call it is; another client answers by the approval's id, and the card, the child's block
and the run all show the outcome.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from clients.loom import LoomClient
from clients.loom.daemon import connect
from tests.clients.cli_support import make_project, write_script
from tests.clients.tui.support import connected, tui, type_message, until
from tests.orchestrator.daemon.daemon_process import running_daemon

pytestmark = pytest.mark.timeout(120)


async def answered_elsewhere(home: Path, project: Path, parent_model: str) -> tuple[str, str, str, str]:
    """The card's text while it waits, who decided it, the child block's last text and the parent's run status."""
    app = tui(home, project, parent_model)
    async with app.run_test(size=(120, 40)) as pilot:
        await connected(pilot)
        await type_message(pilot, "have a child write the file")
        await until(pilot, lambda: bool(app.conversation.pending_cards()), "the child's card on the parent")
        (card,) = app.conversation.pending_cards()
        asked = card.text
        assert card.child_session_id and app.session_id != card.child_session_id
        block = app.conversation.child(card.child_session_id)
        assert block is not None
        await until(pilot, lambda: block.status == "awaiting approval", "the child's block to say it waits")
        async with connect(home) as session:  # a second client, answering by the approval's id
            await LoomClient(session, on_daemon=True).decide_approval(
                card.approval_id, "approve_once", decided_by="second-client"
            )
        await until(pilot, lambda: card.decision == "approve_once", "the card to show the other client's decision")
        await until(pilot, lambda: block.status == "completed", "the child's block to show its end")
        await until(pilot, lambda: app.status.run == "completed", "the parent's run to finish")
        ended = block.text, app.status.run

        parent = app.session_id
        block.focus()
        await pilot.press("enter")  # the child's own session, then back
        await until(pilot, lambda: app.session_id == card.child_session_id, "the child's session to be shown")
        shown = app.conversation
        await until(pilot, lambda: any(t.source == "Wrote c.txt." for t in shown.texts), "the child's own answer")
        await until(pilot, lambda: app.check_action("parent_session", ()) is True, "Ctrl+B to be offered")
        await pilot.press("ctrl+b")
        await until(pilot, lambda: app.session_id == parent, "the parent again")
        await until(pilot, lambda: app.conversation.child(card.child_session_id) is not None, "the parent's blocks")
        return asked, card.decided_by, *ended


def test_a_childs_approval_shows_on_the_parent_and_is_answered_from_another_client(tmp_path: Path) -> None:
    project, home = make_project(tmp_path / "p"), tmp_path / "home"
    child = write_script(
        tmp_path / "child.json",
        [
            {"text": "Writing.", "tool_calls": [{"name": "fs__write", "arguments": {"path": "c.txt", "content": "C"}}]},
            {"text": "Wrote c.txt."},
        ],
    )
    spawn = {"goal": "Write c.txt\nwith a C in it", "model": f"scripted:{child}", "timeout_s": 60}
    parent = write_script(
        tmp_path / "parent.json",
        [
            {"text": "Starting a child.", "tool_calls": [{"name": "subagents__spawn", "arguments": spawn}]},
            {"text": "Waiting.", "tool_calls": [{"name": "subagents__wait", "arguments": {"timeout_s": 60}}]},
            {"text": "The child wrote it."},
        ],
    )
    with running_daemon(home, tmp_path):
        asked, decided_by, child_text, status = anyio.run(answered_elsewhere, home, project, f"scripted:{parent}")
    assert "child (s_" in asked and "wants to run fs__write" in asked
    assert decided_by == "second-client"
    assert "[completed" in child_text and "Write c.txt" in child_text and child_text.endswith("Wrote c.txt.")
    assert status == "completed"
    assert (project / "c.txt").read_text() == "C"
