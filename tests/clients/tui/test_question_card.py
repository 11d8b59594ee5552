"""A server's question as a card in the TUI: answered from its fields, declined, refused and kept, answered elsewhere.

Against a real `loom serve` whose session runs a real stdio MCP server that elicits
(tests/orchestrator/hub/asking_test_server.py) under a scripted model; one test reads the card's text fed fixed
events, without a daemon.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from textual.pilot import Pilot
from textual.widgets import Checkbox, Input, Select

from clients.tui.app import LoomApp
from clients.tui.connection import DECIDED_BY
from clients.tui.prompt import Prompt
from clients.tui.question_card import QuestionCard
from orchestrator.events import QuestionAnswered, QuestionAsked
from tests.clients.cli_support import make_project, run_loom, write_script
from tests.clients.tui.scenes import SESSION, ConversationApp, settle, user
from tests.clients.tui.support import SIZE, connected, stored_messages, tui, type_message, until
from tests.orchestrator.daemon.daemon_process import running_daemon

pytestmark = pytest.mark.timeout(120)

ASKING = Path(__file__).resolve().parents[2] / "orchestrator" / "hub" / "asking_test_server.py"
ASK: list[dict[str, Any]] = [
    {"text": "asking", "tool_calls": [{"id": "a", "name": "asking__ask", "arguments": {"topic": "apples"}}]},
    {"text": "got: {{result:a}}"},
]
WIDE = (120, 40)


def setup(tmp_path: Path) -> tuple[Path, Path, str]:
    """A home whose config runs the asking server, a project, and the scripted model that calls it."""
    project, home = make_project(tmp_path / "p"), tmp_path / "home"
    home.mkdir(mode=0o700)
    server = {"command": sys.executable, "args": [str(ASKING)]}
    (home / "config.json").write_text(json.dumps({"mcpServers": {"asking": server}}), encoding="utf-8")
    return home, project, f"scripted:{write_script(tmp_path / 's.json', ASK)}"


def open_card(app: LoomApp) -> QuestionCard | None:
    return next((c for c in app.conversation.query(QuestionCard) if c.pending), None)


async def asked(pilot: Pilot[int]) -> QuestionCard:
    """Send the message that makes the server ask, and wait for the card (its first field takes the keys)."""
    app = pilot.app
    assert isinstance(app, LoomApp)
    await connected(pilot)
    await type_message(pilot, "order")
    await until(pilot, lambda: open_card(app) is not None, "the question card")
    card = open_card(app)
    assert card is not None
    await until(pilot, lambda: isinstance(app.focused, Input), "the card's first field to take the keys")
    return card


async def typed(pilot: Pilot[int], text: str) -> None:
    for char in text:
        await pilot.press("space" if char == " " else char)


async def final_text(home: Path, session_id: str | None) -> str:
    assert session_id is not None
    return (await stored_messages(home, session_id))[-1].message.text


async def answered_from_the_card(home: Path, project: Path, model: str) -> tuple[str, str]:
    app = tui(home, project, model, mode="bypass")
    async with app.run_test(size=WIDE) as pilot:
        card = await asked(pilot)
        assert "How many apples should I order, and for whom?" in card.text
        await typed(pilot, "Ann")
        await pilot.press("tab")  # to the count field
        await typed(pilot, "3")
        await pilot.press("enter")
        await until(pilot, lambda: card.action == "accept", "the answer to be taken")
        await until(pilot, lambda: app.status.run == "completed", "the run to finish")
        assert isinstance(app.focused, Prompt)  # the keys go back to the prompt
        return card.text, await final_text(home, app.session_id)


def test_a_form_answered_from_the_card_reaches_the_server(tmp_path: Path) -> None:
    home, project, model = setup(tmp_path)
    with running_daemon(home, tmp_path):
        text, final = anyio.run(answered_from_the_card, home, project, model)
    assert final == "got: accepted: 3 apples for Ann"
    assert f"accepted by {DECIDED_BY}" in text and "[Enter]" not in text  # the card is now a line saying who


async def declined_from_the_card(home: Path, project: Path, model: str) -> str:
    app = tui(home, project, model, mode="bypass")
    async with app.run_test(size=WIDE) as pilot:
        card = await asked(pilot)
        await typed(pilot, "d")  # typed into the field: a name, not a decision
        await pilot.pause()
        assert card.pending
        await pilot.press("shift+tab")  # from the first field to the card itself, where d declines
        await until(pilot, lambda: app.focused is card, "the card to have the keys")
        await pilot.press("d")
        await until(pilot, lambda: card.action == "decline", "the decline to be taken")
        await until(pilot, lambda: app.status.run == "completed", "the run to finish")
        return await final_text(home, app.session_id)


def test_d_on_the_card_declines_and_the_server_hears_it(tmp_path: Path) -> None:
    home, project, model = setup(tmp_path)
    with running_daemon(home, tmp_path):
        final = anyio.run(declined_from_the_card, home, project, model)
    assert final == "got: not answered: decline"


async def refused_then_fixed(home: Path, project: Path, model: str) -> tuple[str, str]:
    app = tui(home, project, model, mode="bypass")
    async with app.run_test(size=WIDE) as pilot:
        card = await asked(pilot)
        await pilot.press("tab")
        await typed(pilot, "4")  # the name (required) left empty
        await pilot.press("enter")
        await until(pilot, lambda: bool(card.error), "the face's refusal on the card")
        refused = card.text
        assert card.pending and card.is_mounted and not card.sending
        await pilot.press("shift+tab")  # back to the name
        await typed(pilot, "Bo")
        await pilot.press("enter")
        await until(pilot, lambda: app.status.run == "completed", "the run to finish")
        assert card.action == "accept" and not card.error
        return refused, await final_text(home, app.session_id)


def test_an_answer_the_face_refuses_is_shown_on_the_card_which_stays_open(tmp_path: Path) -> None:
    home, project, model = setup(tmp_path)
    with running_daemon(home, tmp_path):
        refused, final = anyio.run(refused_then_fixed, home, project, model)
    assert "'name' is a required property" in refused and "stays open" in refused
    assert final == "got: accepted: 4 apples for Bo"


async def answered_elsewhere(home: Path, project: Path, model: str) -> tuple[str, str, str]:
    app = tui(home, project, model, mode="bypass")
    async with app.run_test(size=WIDE) as pilot:
        card = await asked(pilot)
        done = await anyio.to_thread.run_sync(
            lambda: run_loom("answer", card.question_id, "decline", cwd=project, home=home)
        )
        assert done.returncode == 0, done.stderr
        await until(pilot, lambda: card.action == "decline", "the card to show the other client's answer")
        await until(pilot, lambda: app.status.run == "completed", "the run to finish")
        await pilot.press("escape")  # an answered card takes no keys: nothing is sent again
        await pilot.pause()
        return card.answered_by, card.text, await final_text(home, app.session_id)


def test_a_card_answered_by_another_client_first_becomes_a_line_saying_who(tmp_path: Path) -> None:
    home, project, model = setup(tmp_path)
    with running_daemon(home, tmp_path):
        by, text, final = anyio.run(answered_elsewhere, home, project, model)
    assert by == "cli" and "declined by cli" in text and "[Enter]" not in text
    assert final == "got: not answered: decline"


# -- the card's text, fed fixed events -----------------------------------------------------------

HOSTILE = QuestionAsked(
    session_id=SESSION, run_id="r_1", question_id="q_1", server="crm\x1b[31m",
    message="Who are you?\u202e\x07\nline two",
    requested_schema={
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "Your name\x1b]0;pwned\x07", "description": "as on your card"},
            "age": {"type": "integer"},
            "plan": {"type": "string", "enum": ["free", "pro"]},
            "subscribe": {"type": "boolean", "default": True},
        },
        "required": ["name", "plan"],
    },
)  # fmt: skip
URL = QuestionAsked(session_id=SESSION, run_id="r_1", question_id="q_2", server="bank", message="Sign in",
                    mode="url", url="https://example.com/login\u202e\x1b[2J")  # fmt: skip


@pytest.mark.anyio
async def test_the_card_shows_each_field_marked_required_and_nothing_a_server_could_use_on_the_terminal() -> None:
    app = ConversationApp([user("r_1", "go"), HOSTILE, URL])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        form, url = app.conversation.question("q_1"), app.conversation.question("q_2")
        assert form is not None and url is not None
        text = form.text
        assert "Question from server crm[31m" in text and "Who are you?" in text and "line two" in text
        assert "Your name]0;pwned *" in text and "as on your card" in text and "age (integer)" in text
        assert "plan *" in text and "subscribe (boolean)" in text and "[Enter] accept" in text
        assert "https://example.com/login[2J" in url.text and "open it yourself" in url.text
        for shown in (form.text, url.text):
            assert not any(c in shown for c in "\x1b\x07\u202e")
        kinds = [type(w) for _, _, w in form._fields]
        assert kinds == [Input, Input, Select, Checkbox]
        assert form.content() == {"subscribe": True}  # empty fields are not given; the checkbox keeps its default
        ended = QuestionAnswered(session_id=SESSION, run_id="r_1", question_id="q_1", action="cancel",
                                 answered_by="loom", reason="nobody answered within 5 minutes")  # fmt: skip
        app.conversation.show(ended)
        await pilot.pause()
        assert "cancelled by loom: nobody answered within 5 minutes" in form.text and not form.pending
        assert "Your name" not in form.text  # a line now, its fields gone


@pytest.mark.anyio
async def test_a_question_read_from_older_history_after_its_answer_is_shown_answered_and_takes_no_keys() -> None:
    ended = QuestionAnswered(session_id=SESSION, run_id="r_1", question_id="q_1", action="accept",
                             content={"name": "Ann", "plan": "pro"}, answered_by="cli")  # fmt: skip
    app = ConversationApp([ended])  # the session was opened at its end: the answer is read first
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.conversation.show_older([user("r_1", "go"), HOSTILE])
        await settle(pilot)
        card = app.conversation.question("q_1")
        assert card is not None and not card.pending and "accepted by cli" in card.text
        assert not isinstance(app.focused, Input | QuestionCard)  # nothing was offered to answer again
