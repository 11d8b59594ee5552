"""Children in the TUI: a block per child in the parent's conversation, cards naming whose call it is, the tree.

Fed fixed events (as the daemon would send them on the parent's stream) and fixed session lists, without a daemon.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from textual import on
from textual.widgets.option_list import Option

from clients.tui.app import LoomApp
from clients.tui.approval_card import ApprovalCard
from clients.tui.child_block import ChildBlock
from clients.tui.session_tree import session_tree
from clients.tui.sessions_panel import NEEDS_YOU_HEADER, SessionsPanel
from orchestrator.events import RunFinished
from orchestrator.messages import ToolUseBlock
from orchestrator.protocol import Event, SessionInfo
from tests.clients.tui.scenes import (
    SESSION,
    TS,
    ConversationApp,
    assistant,
    child_activity,
    child_approval,
    child_decided,
    child_finished,
    child_started,
    settle,
    started,
    user,
)

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

REVIEWER, TESTER, SCOUT = "s_1a2b3c4d5e6f", "s_9f8e7d6c5b4a", "s_0c0c0c0c0c0c"
SPAWN = ToolUseBlock(id="c_spawn", name="subagents__spawn_many", input={"goals": ["review", "test", "docs"]})
PYTEST = ToolUseBlock(id="c_pytest", name="shell__run", input={"command": "pytest -q"})


def fan_out(start: float = TS) -> list[Event]:
    """A parent that started three children: one working, one waiting for an approval, one that timed out."""
    return [
        user("r_1", "review, test and find the docs"),
        assistant("r_1", 0, "Three children.", SPAWN),
        started("r_1", 0, SPAWN),
        child_started("r_1", REVIEWER, "reviewer", "Review the diff in src/\nthen list what is wrong", start),
        child_started("r_1", TESTER, "tester", "Run the tests", start),
        child_started("r_1", SCOUT, "", "Find the docs"),
        child_activity("r_1", REVIEWER, 2, "fs__read"),
        child_approval("r_1", TESTER, PYTEST),
        child_finished("r_1", SCOUT, "failed", reason="timed out after 30s"),
    ]


class Recording(ConversationApp):
    """The conversation alone, keeping what its cards and blocks ask the app to do."""

    def __init__(self, events: list[Event]) -> None:
        super().__init__(events)
        self.asked: list[Any] = []

    @on(ApprovalCard.Decided)
    @on(ChildBlock.Opened)
    def _asked(self, message: Any) -> None:
        self.asked.append(message)


def _block(app: ConversationApp | LoomApp, child: str) -> ChildBlock:
    block = app.conversation.child(child)
    assert block is not None, child
    return block


async def test_each_child_is_a_block_with_its_agent_goal_tool_clock_and_end() -> None:
    app = Recording(fan_out(start=time.time() - 65))
    async with app.run_test(size=(100, 40)) as pilot:
        await settle(pilot)
        reviewer, tester, scout = _block(app, REVIEWER), _block(app, TESTER), _block(app, SCOUT)
        # a child's own tool calls are not the parent's: no tool block, the child's block says what it does
        assert app.conversation.tool("c_pytest") is None
        assert reviewer.text.splitlines()[0].startswith("» child 'reviewer' (s_1a2b3c4d…)  [running 1:0")
        assert reviewer.text.splitlines()[1:] == ["Review the diff in src/", "→ fs__read (step 2)"]
        assert "[awaiting approval 1:0" in tester.text and tester.has_class("-awaiting-approval")
        assert "[failed · 3 steps · 0:04]" in scout.text and "timed out after 30s" in scout.text
        before = reviewer.text
        await pilot.pause(1.1)
        assert reviewer.text != before  # the clock ticks while the child runs

        app.conversation.show(
            child_finished("r_1", REVIEWER, "completed", answer="Two findings:\nsrc/a.py:3\nsrc/b.py:9")
        )
        await pilot.pause()
        assert reviewer.text.splitlines()[0].endswith("[completed · 3 steps · 0:04]")
        assert "→ fs__read" not in reviewer.text and reviewer.text.splitlines()[-3:] == [
            "Two findings:",
            "src/a.py:3",
            "src/b.py:9",
        ]
        after = reviewer.text
        await pilot.pause(1.1)
        assert reviewer.text == after  # ended: the clock stopped

        reviewer.focus()
        await pilot.press("enter")
        await pilot.click(scout)
        await pilot.pause()
        assert [m.child_session_id for m in app.asked if isinstance(m, ChildBlock.Opened)] == [REVIEWER, SCOUT]


async def test_a_childs_card_says_whose_call_it_is_and_answers_by_approval_id() -> None:
    app = Recording(fan_out())
    async with app.run_test(size=(100, 40)) as pilot:
        await settle(pilot)
        app.conversation.show(child_activity("r_1", TESTER, 3, "fs__read"))  # another call of its batch goes on
        await pilot.pause()
        assert "[awaiting approval" in _block(app, TESTER).text and "→ fs__read (step 3)" in _block(app, TESTER).text
        (card,) = app.conversation.pending_cards()
        assert card.text.startswith("Approve? child 'tester' (s_9f8e7d6c…) wants to run shell__run command=pytest -q")
        card.focus()
        await pilot.press("a")
        await pilot.pause()
        (decided,) = [m for m in app.asked if isinstance(m, ApprovalCard.Decided)]
        assert (decided.approval_id, decided.decision) == ("a_c_pytest", "approve_once")

        app.conversation.show(child_decided("r_1", TESTER, PYTEST))  # the decision, as the parent's stream brings it
        await pilot.pause()
        assert "approved once by cli" in card.text and not app.conversation.pending_cards()
        assert "[running" in _block(app, TESTER).text


async def test_a_childs_card_left_undecided_expires_when_the_child_ends() -> None:
    app = Recording(fan_out())
    async with app.run_test(size=(100, 40)) as pilot:
        await settle(pilot)
        app.conversation.show(child_finished("r_1", TESTER, "cancelled", reason="cancelled by the parent"))
        await pilot.pause()
        assert not app.conversation.pending_cards()
        (card,) = list(app.conversation.query(ApprovalCard))
        assert "not decided" in card.text
        assert "[cancelled" in _block(app, TESTER).text and "cancelled by the parent" in _block(app, TESTER).text


async def test_a_parents_run_that_ends_stops_the_clock_of_a_child_still_shown_running() -> None:
    app = Recording(fan_out(start=time.time()))
    async with app.run_test(size=(100, 40)) as pilot:
        await settle(pilot)
        ended = RunFinished(
            session_id=SESSION, ts=time.time(), run_id="r_1", status="cancelled", reason="", final_text="", steps=1
        )
        app.conversation.show(ended)
        await pilot.pause()
        reviewer = _block(app, REVIEWER)
        assert not reviewer.running and "its parent's run ended" in reviewer.text


async def test_a_block_for_a_child_first_seen_mid_run_and_one_rebuilt_after_leaving_the_window() -> None:
    # Opened at its end, the parent's view may begin after a child started: the block begins with what comes.
    events: list[Event] = [child_activity("r_1", REVIEWER, 4, "shell__run")]
    events += [user(f"r_{i}", f"message {i}") for i in range(80)]  # pushes the block out of the window
    app = Recording(events)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        assert app.conversation.child(REVIEWER) is None  # dropped from the window; its record stays
        app.conversation.show(child_finished("r_1", REVIEWER, "completed", answer="ok"))
        app.conversation.action_scroll_home()
        await settle(pilot)
        block = _block(app, REVIEWER)
        assert "[completed" in block.text and block.text.endswith("ok")


async def test_enter_on_a_child_opens_it_and_ctrl_b_goes_back_to_the_parent(tmp_path: Path) -> None:
    app = LoomApp(home=tmp_path / "home", cwd=tmp_path, session_id=SESSION, autostart=False)
    async with app.run_test(size=(100, 40)) as pilot:
        for event in fan_out():
            app.conversation.show(event)
        await settle(pilot)
        assert app.check_action("parent_session", ()) is False  # a top-level session has no parent to go to
        _block(app, REVIEWER).focus()
        await pilot.press("enter")
        await pilot.pause()
        assert app.session_id == REVIEWER and app.conversation.block_count == 0
        assert app.check_action("parent_session", ()) is True
        await pilot.press("ctrl+b")
        await pilot.pause()
        assert app.session_id == SESSION


def _s(sid: str, parent: str = "", agent: str = "", status: str = "idle", cwd: str = "/w") -> SessionInfo:
    return SessionInfo(
        session_id=sid,
        cwd=cwd,
        model="scripted:m",
        mode="ask",
        archived=False,
        last_seq=1,
        status=status,
        parent_session_id=parent,
        agent=agent,
    )


def test_the_tree_nests_children_in_the_order_started_and_opens_branches_that_matter() -> None:
    listed = [  # newest first
        _s("s_late", parent="s_done"),
        _s("s_early", parent="s_done"),
        _s("s_done"),
        _s("s_grand", parent="s_kid", status="awaiting_approval"),
        _s("s_kid", parent="s_busy", agent="tester", status="running"),
        _s("s_busy", status="running"),
        _s("s_lost", parent="s_archived"),
    ]
    rows = session_tree(listed, cwd="/w")
    shown = [(r.session.session_id, r.depth, r.guide, r.descendants, r.expanded) for r in rows]
    assert shown == [
        ("s_busy", 0, "", 2, True),  # a grandchild waits for a person: its branch first, open
        ("s_kid", 1, "└ ", 1, True),
        ("s_grand", 2, "  └ ", 0, False),
        ("s_done", 0, "", 2, False),  # finished children stay folded until asked for
        ("s_lost", 0, "", 0, False),  # its parent is not listed: at the top
    ]
    assert [r.urgent for r in rows] == [True, True, True, False, False]
    opened = session_tree(listed, cwd="/w", opened={"s_done": True, "s_busy": False})
    assert [r.session.session_id for r in opened][3:] == ["s_done", "s_early", "s_late", "s_lost"]
    assert opened[0].expanded  # what waits for a person is never hidden


async def test_the_panel_shows_the_tree_and_space_folds_a_branch(tmp_path: Path) -> None:
    app = LoomApp(home=tmp_path / "home", cwd=Path("/w"), autostart=False)
    async with app.run_test(size=(160, 48)) as pilot:
        panel = app.query_one(SessionsPanel)
        listed = [
            _s(TESTER, parent=SESSION, agent="tester", status="awaiting_approval"),
            _s(REVIEWER, parent=SESSION, agent="\x1b[31mreviewer"),
            _s(SESSION, status="running"),
            _s("s_other0000001"),
        ]
        panel.show_sessions(listed, cwd="/w", current=None)
        await pilot.pause()
        prompts = [str(panel.get_option_at_index(i).prompt) for i in range(panel.option_count)]
        assert prompts[0] == NEEDS_YOU_HEADER
        assert prompts[1].splitlines() == ["  ▾ 00000001", "  running m"]
        # an agent's name is anyone's text: its escape is dropped; the short id is cut to the panel
        assert prompts[2].splitlines() == ["  ├ [31mreviewer 1a2b3c…", "    idle m"]
        assert prompts[3].splitlines() == ["  └ tester 9f8e7d6c", "    approval m"]
        assert "\x1b" not in "".join(prompts)

        panel.focus()
        panel.highlighted = panel.get_option_index(REVIEWER)
        await pilot.press("left")  # on a child: to its parent
        assert _highlighted(panel) == SESSION
        await pilot.press("space")  # a child waits for you: the branch stays open
        assert panel.option_count == 5  # the header, the branch of three, the other session
        panel.show_sessions(
            [_s(TESTER, parent=SESSION, agent="tester"), *listed[1:]], cwd="/w", current=None
        )  # the approval was answered
        await pilot.pause()
        assert panel.option_count == 4  # no header now; what it showed stays open under the user's eyes
        panel.highlighted = panel.get_option_index(SESSION)
        await pilot.press("space")
        await pilot.pause()
        labels = [str(panel.get_option_at_index(i).prompt) for i in range(panel.option_count)]
        assert len(labels) == 2 and labels[0].startswith("  ▸ 00000001") and "+2" in labels[0]
        await pilot.press("right")
        assert panel.option_count == 4  # no header: nothing waits for a person


def _highlighted(panel: SessionsPanel) -> str | None:
    option: Option | None = panel.highlighted_option
    return option.id if option is not None else None


async def test_older_history_read_later_brings_its_children_above_without_touching_the_newer_ones() -> None:
    newer: list[Event] = [
        user("r_2", "again"),
        child_started("r_2", TESTER, "tester", "Run the tests again", child_run="r_again"),
    ]
    older: list[Event] = [
        user("r_1", "first"),
        child_started("r_1", REVIEWER, "reviewer", "Review it"),
        child_finished("r_1", REVIEWER, "completed", answer="Fine."),
        child_started("r_1", TESTER, "tester", "Run the tests"),
        child_finished("r_1", TESTER, "failed", reason="3 tests failed"),
    ]
    app = Recording(newer)
    async with app.run_test(size=(100, 40)) as pilot:
        await settle(pilot)
        app.conversation.show_older(older)
        await settle(pilot)
        assert "[completed" in _block(app, REVIEWER).text
        tester = _block(app, TESTER)  # the child's latest run is the newer one, still going
        assert "[running" in tester.text and "Run the tests again" in tester.text
        blocks = list(app.conversation.query(ChildBlock))
        assert [(b.child_session_id, b.status) for b in blocks] == [
            (REVIEWER, "completed"),
            (TESTER, "failed"),
            (TESTER, "running"),
        ]
