"""A tool call's progress in the TUI (its block says how far the server got, until the call ends), and questions.

Fed fixed events (as the daemon's stream carries them, progress live only), without a daemon.
"""

from __future__ import annotations

import pytest
from rich.text import Text
from textual.widget import Widget

from orchestrator.events import QuestionAnswered, QuestionAsked, ToolProgress
from orchestrator.messages import ToolUseBlock
from tests.clients.tui.scenes import SESSION, ConversationApp, assistant, finished, settle, started, user

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

SLOW = ToolUseBlock(id="c_slow", name="asking__slow", input={"steps": 12})


def shown(block: Widget) -> str:
    """The block's text as it is on screen."""
    content = block.render()
    return content.plain if isinstance(content, Text) else str(content)


def report(progress: float, message: str) -> ToolProgress:
    return ToolProgress(
        session_id=SESSION, run_id="r_1", call_id="c_slow", tool="asking__slow", progress=progress, total=12,
        message=message,
    )  # fmt: skip


async def test_a_running_calls_block_shows_the_servers_latest_progress_and_drops_it_when_done() -> None:
    app = ConversationApp([user("r_1", "go"), assistant("r_1", 1, "", SLOW), started("r_1", 1, SLOW)])
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        block = app.conversation.tool("c_slow")
        assert block is not None and "·" not in shown(block)
        app.conversation.show(report(2, "step 2 of 12"))
        app.conversation.show(report(5, "step 5 of 12\x1b[2J"))  # a server's escapes never reach the terminal
        await pilot.pause()
        assert "· 5/12 step 5 of 12[2J]" in shown(block) and "\x1b" not in shown(block)
        app.conversation.show(finished("r_1", 1, SLOW, "done 12"))
        await pilot.pause()
        assert "[done" in shown(block) and "5/12" not in shown(block)
        app.conversation.show(report(9, "late"))  # a report after the end (a slow page) changes nothing
        await pilot.pause()
        assert "9/12" not in shown(block)


async def test_a_servers_question_shows_as_a_card_then_how_it_was_answered() -> None:
    asked = QuestionAsked(session_id=SESSION, run_id="r_1", question_id="q_1", server="crm", message="Who?\x1b[2J",
                          requested_schema={"properties": {"name": {"type": "string"}}})  # fmt: skip
    answered = QuestionAnswered(session_id=SESSION, run_id="r_1", question_id="q_1", action="decline",
                                answered_by="mcp:claude-code")  # fmt: skip
    app = ConversationApp([user("r_1", "go"), asked])
    async with app.run_test(size=(200, 30)) as pilot:
        await settle(pilot)
        card = app.conversation.question("q_1")  # a card now (tests/clients/tui/test_question_card.py)
        assert card is not None and "crm" in card.text and "Who?" in card.text and "name" in card.text
        assert "\x1b" not in card.text
        app.conversation.show(answered)
        await pilot.pause()
        assert "declined by mcp:claude-code" in card.text
