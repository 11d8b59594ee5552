"""Tool blocks: a file edit is shown as its diff, and the full result is one key (or click) away."""

from __future__ import annotations

import html

import pytest

from clients.tui.diff_view import diff_lines, file_change
from orchestrator.messages import ToolUseBlock
from orchestrator.protocol import Event
from tests.clients.tui.scenes import ConversationApp, assistant, finished, settle, started, user

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

LONG = "\n".join(f"result line {i}" for i in range(30))


def test_an_edit_is_a_unified_diff_numbered_from_where_it_starts_in_the_file() -> None:
    change = file_change(
        "fs__edit", {"path": "a.py", "old": "x = 1\ny = 2\n", "new": "x = 1\ny = 3\n"}, {"first_line": 40}
    )
    assert change is not None
    assert diff_lines(change) == ["--- a/a.py", "+++ b/a.py", "@@ -40,2 +40,2 @@", " x = 1", "-y = 2", "+y = 3"]


def test_a_new_file_is_all_added_and_an_overwrite_says_its_old_content_is_unknown() -> None:
    created = file_change("fs__write", {"path": "n.txt", "content": "one\ntwo\n"}, {"created": True})
    assert created is not None and diff_lines(created)[:3] == ["--- /dev/null", "+++ b/n.txt", "@@ -0,0 +1,2 @@"]
    overwritten = file_change("fs__write", {"path": "n.txt", "content": "one\n"}, {"created": False})
    assert overwritten is not None and not overwritten.old_known
    assert file_change("shell__run", {"command": "ls"}, None) is None


async def test_the_full_result_is_shown_on_enter_and_hidden_again() -> None:
    call = ToolUseBlock(id="c_1", name="fs__read", input={"path": "big.txt"})
    events: list[Event] = [
        user("r", "read it"),
        assistant("r", 0, "", call),
        started("r", 0, call),
        finished("r", 0, call, LONG),
    ]
    app = ConversationApp(list(events))
    async with app.run_test(size=(80, 40)) as pilot:
        await settle(pilot)
        block = app.conversation.tool("c_1")
        assert block is not None
        short = block.size.height
        assert "27\xa0more\xa0lines" in screen(app) and "line\xa029" not in screen(app)
        block.focus()
        await pilot.press("enter")
        await pilot.pause()
        assert block.size.height >= short + 26 and "line\xa029" in screen(app)
        await pilot.press("enter")
        await pilot.pause()
        assert block.size.height == short
        await pilot.click(block)
        await pilot.pause()
        assert block.size.height >= short + 26


def screen(app: ConversationApp) -> str:
    return html.unescape(app.export_screenshot())


async def test_text_dragged_over_with_the_mouse_is_copied_with_c() -> None:
    events: list[Event] = [user("r", "say it"), assistant("r", 0, "The quick brown fox jumps over the lazy dog.")]
    app = ConversationApp(events)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        (text,) = app.conversation.texts
        await pilot.mouse_down(text, offset=(0, 0))
        await pilot.hover(text, offset=(18, 0))
        await pilot.mouse_up(text, offset=(18, 0))
        await pilot.pause()
        assert app.focused is app.conversation  # the click went to the conversation, whose keys copy
        await pilot.press("c")
        assert app.clipboard == "The quick brown fox"
