"""The prompt's input: completion of slash commands, history recall (kept 0600 in $LOOM_HOME), unknown commands."""

from __future__ import annotations

import stat
from pathlib import Path

import anyio
import pytest
from textual.pilot import Pilot

from clients.tui.app import LoomApp
from clients.tui.completion import CompletionList
from clients.tui.history import HISTORY_FILE
from clients.tui.notice_line import NoticeLine
from clients.tui.prompt import Prompt
from clients.tui.user_message import UserMessageBlock
from tests.clients.cli_support import make_project, write_script
from tests.clients.tui.support import SIZE, connected, tui, type_message, until
from tests.orchestrator.daemon.daemon_process import running_daemon

pytestmark = pytest.mark.timeout(120)


async def type_text(pilot: Pilot[int], text: str) -> None:
    """Type ``text`` into the prompt without sending it."""
    for char in text:
        await pilot.press("space" if char == " " else char)


def notices(app: LoomApp) -> list[str]:
    return [n.text for n in app.conversation.query(NoticeLine)]


def skill(root: Path, name: str, description: str) -> None:
    (root / name).mkdir(parents=True)
    (root / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\nDo it.\n")


def test_slash_opens_the_completion_list_and_tab_completes(tmp_path: Path) -> None:
    project, home = make_project(tmp_path / "p"), tmp_path / "home"
    skill(home / "skills", "release-notes", "Write release notes.")
    script = write_script(tmp_path / "s.json", [{"text": "hello"}, {"text": "notes written"}])

    async def drive() -> None:
        app = tui(home, project, f"scripted:{script}")
        async with app.run_test(size=SIZE) as pilot:
            await connected(pilot)
            prompt, menu = app.query_one(Prompt), app.query_one(CompletionList)
            assert not menu.display
            await type_message(pilot, "hi")  # a session, so that its skills can be listed
            await until(pilot, lambda: app.status.run == "completed", "the first run")
            await type_text(pilot, "/")
            await until(pilot, lambda: "/release-notes" in [c.text for c in menu.candidates], "the skill offered")
            shown = [c.text for c in menu.candidates]
            assert menu.display and shown[:3] == ["/compact", "/model", "/mode"]
            await type_text(pilot, "mo")
            await until(pilot, lambda: [c.text for c in menu.candidates] == ["/model", "/mode"], "two candidates")
            await pilot.press("down", "tab")  # Down moves in the list, not through the history
            assert prompt.text == "/mode "
            await until(pilot, lambda: [c.text for c in menu.candidates][:1] == ["/mode ask"], "the modes")
            await type_text(pilot, "pl")
            await until(pilot, lambda: [c.text for c in menu.candidates] == ["/mode plan"], "plan offered")
            await pilot.press("tab")
            assert prompt.text == "/mode plan "
            await pilot.press("enter")
            await until(pilot, lambda: app.status.mode == "plan", "the mode to change")
            assert prompt.text == "" and not menu.display
            await type_text(pilot, "/model s")
            await until(pilot, lambda: f"/model scripted:{script}" in [c.text for c in menu.candidates], "a model")
            await pilot.press("escape")
            assert not menu.display and prompt.text == "/model s"
            prompt.clear()
            await type_message(pilot, "/release-notes for v2")  # a skill, by name: a message asking for it
            await until(pilot, lambda: len(app.conversation.texts) == 2, "the skill's answer")
            sent = [b.text for b in app.conversation.query(UserMessageBlock)]
            assert sent[-1] == 'Use the skill "release-notes" (load it with the loom__skill tool) for this: for v2'

    with running_daemon(home, tmp_path):
        anyio.run(drive)


def test_up_and_down_walk_the_history_keeping_the_draft_and_a_new_tui_recalls_it(tmp_path: Path) -> None:
    project, home = make_project(tmp_path / "p"), tmp_path / "home"
    script = write_script(tmp_path / "s.json", [{"text": "one"}, {"text": "two"}])

    async def first() -> None:
        app = tui(home, project, f"scripted:{script}")
        async with app.run_test(size=SIZE) as pilot:
            await connected(pilot)
            prompt = app.query_one(Prompt)
            await type_message(pilot, "first")
            await until(pilot, lambda: app.status.run == "completed", "the first run")
            await type_message(pilot, "second")
            await until(pilot, lambda: len(app.conversation.texts) == 2, "the second answer")
            await type_text(pilot, "dra")
            await pilot.press("ctrl+j")
            await type_text(pilot, "ft")  # a two-line draft: Up on its last line moves the cursor, not the history
            await pilot.press("up")
            assert prompt.text == "dra\nft"
            await pilot.press("up")
            assert prompt.text == "second"
            await pilot.press("up")
            assert prompt.text == "first"
            await pilot.press("up")  # the oldest stays
            assert prompt.text == "first"
            await pilot.press("down")
            assert prompt.text == "second"
            await pilot.press("down")
            assert prompt.text == "dra\nft"  # the draft is back, whole

    async def second() -> None:
        app = tui(home, project, f"scripted:{script}")
        async with app.run_test(size=SIZE) as pilot:
            prompt = app.query_one(Prompt)
            await until(pilot, lambda: len(prompt.recall.entries) == 2, "the kept history to load")
            await pilot.press("up")
            assert prompt.text == "second"

    with running_daemon(home, tmp_path):
        anyio.run(first)
        kept = home / HISTORY_FILE
        assert stat.S_IMODE(kept.stat().st_mode) == 0o600
        assert kept.read_text().splitlines() == ['"first"', '"second"']
        anyio.run(second)


def test_an_unknown_command_says_so_and_stays_in_the_prompt(tmp_path: Path) -> None:
    project, home = make_project(tmp_path / "p"), tmp_path / "home"
    script = write_script(tmp_path / "s.json", [{"text": "sent as a message"}])

    async def drive() -> None:
        app = tui(home, project, f"scripted:{script}")
        async with app.run_test(size=SIZE) as pilot:
            await connected(pilot)
            prompt = app.query_one(Prompt)
            await type_message(pilot, "/nope")
            await until(pilot, lambda: any("unknown command /nope" in n for n in notices(app)), "the refusal")
            assert prompt.text == "/nope"
            assert app.session_id is None  # nothing was sent
            prompt.clear()
            await type_message(pilot, "/help")
            await until(pilot, lambda: any("/rewind" in n and "Ctrl+C" in n for n in notices(app)), "the help")
            await type_message(pilot, "//etc is a message")
            await until(pilot, lambda: [t.source for t in app.conversation.texts] == ["sent as a message"], "answer")

    with running_daemon(home, tmp_path):
        anyio.run(drive)
