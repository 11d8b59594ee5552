"""A long session: it opens with only its last blocks mounted, and scrolling up brings every earlier one back."""

from __future__ import annotations

import time

import anyio
import pytest

from clients.tui.assistant_text import AssistantText
from clients.tui.block_window import MOST, WINDOW
from clients.tui.conversation import Conversation
from clients.tui.user_message import UserMessageBlock
from tests.clients.tui.scenes import ConversationApp, long_session, settle, user

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

TURNS = 2500  # 10,000 events


def shown_questions(conversation: Conversation) -> list[int]:
    return [int(b.text.split()[1]) for b in conversation.query(UserMessageBlock)]


async def test_ten_thousand_events_open_fast_with_only_the_last_blocks_mounted() -> None:
    app = ConversationApp(list(long_session(TURNS)))
    begun = time.perf_counter()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        opened = time.perf_counter() - begun
        conversation = app.conversation
        assert conversation.block_count == 4 * TURNS - TURNS  # a tool call and its result make one block
        assert len(conversation.children) <= WINDOW
        questions = shown_questions(conversation)
        assert questions[-1] == TURNS - 1 and questions == list(range(questions[0], TURNS))
        assert conversation.scroll_y == conversation.max_scroll_y  # at the bottom, following
        last = conversation.query(AssistantText).last()
        assert last.source == f"Answer **{TURNS - 1}**: the notes say {TURNS - 1}."
    assert opened < 5.0, f"opening took {opened:.2f}s"  # generous here; benchmarks/tui.py measures it


async def test_scrolling_up_mounts_earlier_blocks_in_order_without_moving_what_is_on_screen() -> None:
    app = ConversationApp(list(long_session(80)))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        conversation = app.conversation
        seen: set[int] = set(shown_questions(conversation))
        first_before = conversation.window[0]
        conversation.focus()
        for _ in range(400):
            if conversation.window[0] == 0 and conversation.scroll_y == 0:
                break
            await pilot.press("pageup")
            await settle(pilot)
            questions = shown_questions(conversation)
            assert questions == list(range(questions[0], questions[0] + len(questions))), "doubled or missing"
            seen.update(questions)
            assert len(conversation.children) <= MOST
        assert conversation.window[0] == 0 < first_before
        assert seen == set(range(80))
        assert shown_questions(conversation)[0] == 0


async def test_what_is_on_screen_stays_put_when_earlier_blocks_are_mounted_above_it() -> None:
    app = ConversationApp(list(long_session(200)))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        conversation = app.conversation
        lo = conversation.window[0]
        edge = conversation.size.height
        conversation.scroll_to(y=edge + 6, animate=False, immediate=True)
        await settle(pilot)
        assert conversation.window[0] == lo  # not near the top yet
        watched = next(w for w in conversation.children if w.virtual_region.y >= edge + 8)
        on_screen = watched.virtual_region.y - edge  # where it is once the view moves to the edge
        conversation.scroll_to(y=edge, animate=False, immediate=True)  # near the top: the blocks above come
        await settle(pilot)
        assert conversation.window[0] < lo
        assert watched.virtual_region.y > edge + 8 + 10  # pushed down the document by what came above...
        assert watched.virtual_region.y - conversation.scroll_y == on_screen  # ...but not on the screen


async def test_home_shows_the_first_blocks_and_end_follows_the_last_again() -> None:
    app = ConversationApp(list(long_session(TURNS)))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        conversation = app.conversation
        conversation.focus()
        await pilot.press("home")
        await settle(pilot)
        assert shown_questions(conversation)[0] == 0 and conversation.scroll_y == 0
        conversation.show(user("r_new", "while you read the start"))
        await settle(pilot)
        assert "while you read the start" not in [b.text for b in conversation.query(UserMessageBlock)]
        await pilot.press("end")
        await settle(pilot)
        texts = [b.text for b in conversation.query(UserMessageBlock)]
        assert texts[-1] == "while you read the start" and texts.count(texts[-1]) == 1
        conversation.show(user("r_next", "and after"))
        await settle(pilot)
        assert conversation.query(UserMessageBlock).last().text == "and after"
        assert conversation.scroll_y == conversation.max_scroll_y


async def test_a_block_changed_while_outside_the_window_shows_its_change_when_it_comes_back() -> None:
    events = list(long_session(120))
    app = ConversationApp(events)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        conversation = app.conversation
        assert conversation.tool("c_00000") is None  # far above: no widget
        conversation.focus()
        await pilot.press("home")
        await settle(pilot)
        block = conversation.tool("c_00000")
        assert block is not None and block.status == "done" and "line one of 0" in block.result
        with anyio.fail_after(5):
            while not conversation.texts[0].settled.is_set():
                await pilot.pause(0.02)
        assert conversation.texts[0].source == "Answer **0**: the notes say 0."


async def test_up_at_the_top_of_the_window_mounts_the_blocks_above_even_when_its_scroll_came_while_settling() -> None:
    # The scroll that brings the view to the window's top may come while blocks just mounted settle (it is ignored
    # then); at the top, nothing scrolls any more, so the next Up itself must mount the blocks above.
    app = ConversationApp(list(long_session(80)))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        conversation = app.conversation
        lo = conversation.window[0]
        assert lo > 0
        conversation.focus()
        conversation._moving = True  # the window settling, as the scroll arrives
        conversation.scroll_to(y=0, animate=False, immediate=True)
        await pilot.pause()
        conversation._moving = False
        assert conversation.window[0] == lo and conversation.scroll_y == 0
        await pilot.press("pageup")
        await settle(pilot)
        assert conversation.window[0] < lo
        questions = shown_questions(conversation)
        assert questions == list(range(questions[0], questions[0] + len(questions)))
