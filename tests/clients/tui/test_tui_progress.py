"""A tool call's progress in the TUI: its block's status says how far the server got, until the call ends.

Fed fixed events (as the daemon's stream carries them, progress live only), without a daemon.
"""

from __future__ import annotations

import pytest
from rich.text import Text

from clients.tui.tool_block import ToolBlock
from orchestrator.events import ToolProgress
from orchestrator.messages import ToolUseBlock
from tests.clients.tui.scenes import SESSION, ConversationApp, assistant, finished, settle, started, user

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

SLOW = ToolUseBlock(id="c_slow", name="asking__slow", input={"steps": 12})


def shown(block: ToolBlock) -> str:
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
