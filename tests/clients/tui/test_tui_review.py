"""A review after a crash, answered from the TUI's card: run the call again, or stop the run.

The daemon is SIGKILLed while a side-effecting call (``rs__charge``, which counts its executions in a file) is in
progress; after a restart, ``/resume`` asks whether to run it again. Each answer is one key on the card.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from clients.tui.approval_card import ApprovalCard
from tests.clients.test_cli_resume import crash_during
from tests.clients.tui.support import SIZE, connected, tui, type_message, until
from tests.orchestrator.daemon.daemon_process import running_daemon

pytestmark = pytest.mark.timeout(150)


async def _review_then(tmp_path: Path, key: str) -> tuple[str, str, int]:
    """Crash mid-charge, resume from the TUI, press ``key`` on the review card: the run's status, the card's text
    and how often the charge ran."""
    crashed = await crash_during(tmp_path, "charge")
    with running_daemon(crashed.home, tmp_path, log_name="second"):
        app = tui(crashed.home, tmp_path / "work", "scripted:unused", session_id=crashed.session_id)
        async with app.run_test(size=SIZE) as pilot:
            await connected(pilot)
            await type_message(pilot, "/resume")
            await until(pilot, lambda: bool(app.conversation.pending_cards()), "the review card")
            (card,) = app.conversation.pending_cards()
            assert card.kind == "review" and "run it again" in card.text
            await pilot.pause(0.2)  # the card takes the keys once the prompt is empty
            if app.focused is not card:
                card.focus()
            await pilot.press(key)
            await until(pilot, lambda: app.status.run in ("completed", "cancelled", "failed"), "the run's end", 30)
            body = card.text
            return app.status.run, body, crashed.count("x")


def test_r_on_a_review_runs_the_call_again_and_the_run_finishes(tmp_path: Path) -> None:
    status, body, charges = anyio.run(_review_then, tmp_path, "r")
    assert status == "completed"
    assert "approved once by tui" in body
    assert charges == 2


def test_x_on_a_review_stops_the_run_and_nothing_runs_again(tmp_path: Path) -> None:
    status, body, charges = anyio.run(_review_then, tmp_path, "x")
    assert status == "cancelled"
    assert "not decided" in body and "cancelled" in body  # the card no longer offers keys
    assert charges == 1


def test_s_does_nothing_on_a_review() -> None:
    # "Approve for the session" has no meaning for a call that may already have taken effect.
    card = ApprovalCard(approval_id="ap_1", tool="rs__charge", arguments={}, reason="", kind="review", run_id="r")
    assert card.check_action("decide", ("approve_session",)) is False
    assert card.check_action("decide", ("approve_once",)) is True
    assert card.check_action("stop_run", ()) is True
    policy = ApprovalCard(approval_id="ap_2", tool="fs__write", arguments={}, reason="", run_id="r")
    assert policy.check_action("stop_run", ()) is False
    assert policy.check_action("decide", ("approve_session",)) is True
