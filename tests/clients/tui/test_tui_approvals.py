"""Approval cards: answered from the TUI's keys, and updated when another client (`loom approve`) answers first."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from clients.tui.connection import DECIDED_BY
from clients.tui.tool_block import ToolBlock
from tests.clients.cli_support import make_project, run_loom, write_script
from tests.clients.tui.support import SIZE, connected, tui, type_message, until
from tests.orchestrator.daemon.daemon_process import running_daemon

pytestmark = pytest.mark.timeout(120)


def write_call(path: str, content: str) -> dict[str, object]:
    return {"name": "fs__write", "arguments": {"path": path, "content": content}}


async def answered_from_the_tui(home: Path, project: Path, model: str) -> None:
    app = tui(home, project, model)
    async with app.run_test(size=SIZE) as pilot:
        await connected(pilot)
        await type_message(pilot, "write two files")
        await until(pilot, lambda: len(app.conversation.pending_cards()) == 1, "the first card")
        (first,) = app.conversation.pending_cards()
        await until(pilot, lambda: app.focused is first, "the card to take the keys")
        assert app.status.run == "awaiting approval"
        await pilot.press("a")
        await until(pilot, lambda: first.decision == "approve_once", "the stored decision")
        assert first.decided_by == DECIDED_BY
        await until(pilot, lambda: any(c is not first for c in app.conversation.pending_cards()), "the second card")
        (second,) = app.conversation.pending_cards()
        await until(pilot, lambda: app.focused is second, "the second card to take the keys")
        await pilot.press("d")
        await type_message(pilot, "not this one")
        await until(pilot, lambda: app.status.run == "completed", "the run to finish")
        assert second.decision == "deny" and second.deny_reason == "not this one"
        blocks = {b.arguments["path"]: b for b in app.conversation.query(ToolBlock) if isinstance(b.arguments, dict)}
        assert blocks["a.txt"].status == "done"
        assert blocks["b.txt"].status == "failed" and blocks["b.txt"].failure == "denied"


def test_an_approval_is_answered_from_the_card_and_a_denial_carries_its_reason(tmp_path: Path) -> None:
    project, home = make_project(tmp_path / "p"), tmp_path / "home"
    script = write_script(
        tmp_path / "s.json",
        [
            {"text": "Writing a.", "tool_calls": [write_call("a.txt", "A")]},
            {"text": "Writing b.", "tool_calls": [write_call("b.txt", "B")]},
            {"text": "Done."},
        ],
    )
    with running_daemon(home, tmp_path):
        anyio.run(answered_from_the_tui, home, project, f"scripted:{script}")
    assert (project / "a.txt").read_text() == "A"
    assert not (project / "b.txt").exists()


async def answered_elsewhere(home: Path, project: Path, model: str) -> str:
    app = tui(home, project, model)
    async with app.run_test(size=SIZE) as pilot:
        await connected(pilot)
        await type_message(pilot, "write a file")
        await until(pilot, lambda: len(app.conversation.pending_cards()) == 1, "the card")
        (card,) = app.conversation.pending_cards()
        approved = await anyio.to_thread.run_sync(lambda: run_loom("approve", card.approval_id, cwd=project, home=home))
        assert approved.returncode == 0, approved
        await until(pilot, lambda: card.decision == "approve_once", "the card to show the other client's decision")
        await until(pilot, lambda: app.status.run == "completed", "the run to finish")
        return card.decided_by


def test_the_card_says_when_another_client_decided_first(tmp_path: Path) -> None:
    project, home = make_project(tmp_path / "p"), tmp_path / "home"
    script = write_script(
        tmp_path / "s.json", [{"text": "Writing.", "tool_calls": [write_call("c.txt", "C")]}, {"text": "Done."}]
    )
    with running_daemon(home, tmp_path):
        decided_by = anyio.run(answered_elsewhere, home, project, f"scripted:{script}")
    assert decided_by == "cli"
    assert (project / "c.txt").read_text() == "C"
