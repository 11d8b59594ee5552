"""Tool blocks: a file edit is shown as its diff, and the full result is one key (or click) away."""

from __future__ import annotations

import html
import itertools

import pytest

from clients.tui.diff_view import diff_lines, file_change
from orchestrator.events import TextDelta
from orchestrator.messages import ToolUseBlock
from orchestrator.protocol import Event
from tests.clients.tui.scenes import SESSION, ConversationApp, assistant, finished, settle, started, user

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


async def test_a_long_streamed_text_shows_every_paragraph_in_order_and_ends_as_the_stored_text() -> None:
    paragraphs = [f"Paragraph {i}: " + " ".join(f"w{i}_{j}" for j in range(30)) for i in range(20)]
    paragraphs.insert(15, "```python\nx = 1\n\ny = 2\n```")  # a blank line inside a code fence is not a break
    whole = "\n\n".join(paragraphs)
    app = ConversationApp([user("r", "write a lot")])
    async with app.run_test(size=(100, 40)) as pilot:
        conversation = app.conversation
        inside_fence = whole.index("x = 1\n\n") + len("x = 1\n\n")  # a frame shows the text ending there
        cuts = sorted({*range(0, len(whole), 97), inside_fence, len(whole)})
        for start, end in itertools.pairwise(cuts):
            conversation.show(TextDelta(session_id=SESSION, run_id="r", step=0, text=whole[start:end]))
            await pilot.pause()
        (text,) = conversation.texts
        streamed = text.render()
        marks = [streamed.plain.index(f"Paragraph {i}:") for i in range(20)]
        assert marks == sorted(marks)
        code = streamed.plain.index("y = 2")  # after the fence's blank line: still in the code block
        assert streamed.get_style_at_offset(app.console, code).bgcolor is not None
        conversation.show(assistant("r", 0, whole))
        conversation.show(assistant("r2", 0, whole))  # the same text, as a session's history shows it
        await settle(pilot)
        ended, opened = conversation.texts
        assert ended is text and text.source == whole and text.settled.is_set()
        # the streamed text ends rendered exactly as the same text opened from history
        final, fresh = text.render(), opened.render()
        assert final.plain == fresh.plain
        assert [final.get_style_at_offset(app.console, i) for i in range(len(final))] == [
            fresh.get_style_at_offset(app.console, i) for i in range(len(fresh))
        ]
