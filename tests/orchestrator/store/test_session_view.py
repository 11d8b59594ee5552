"""A session's status, most urgent first, and a title made safe to print."""

from __future__ import annotations

import pytest

from orchestrator.store.session_view import MAX_TITLE_CHARS, clean_title, session_status


@pytest.mark.parametrize(
    ("facts", "status"),
    [
        ({"archived": True, "running": True, "waiting": ["review"]}, "archived"),
        ({"running": True, "waiting": ["policy", "review"]}, "needs_review"),
        ({"running": True, "waiting": ["policy"]}, "awaiting_approval"),
        ({"running": True, "last_run_status": "failed"}, "running"),
        ({"last_run_status": "running", "last_run_live": True}, "running"),
        ({"last_run_status": "running", "last_run_live": False}, "interrupted"),
        ({"last_run_status": "awaiting_approval", "last_run_live": False}, "needs_review"),
        ({"last_run_status": "needs_review"}, "needs_review"),
        ({"last_run_status": "failed"}, "failed"),
        ({"last_run_status": "interrupted"}, "interrupted"),
        ({"last_run_status": "completed"}, "idle"),
        ({"last_run_status": "cancelled"}, "idle"),
        ({}, "idle"),
    ],
)
def test_the_most_urgent_status_wins(facts: dict[str, object], status: str) -> None:
    base: dict[str, object] = {"archived": False, "running": False}
    assert session_status(**{**base, **facts}) == status  # type: ignore[arg-type]


def test_a_title_loses_every_terminal_control_and_stays_one_bounded_line() -> None:
    assert clean_title("\x1b[31mred\x1b[0m") == "[31mred[0m"  # no ESC: the rest is only text
    assert clean_title("a\u009b2Jb") == "a2Jb"  # the one-byte CSI of C1 goes, its harmless tail stays
    assert clean_title("left\u202eright\u200b") == "leftright"  # bidi override, zero-width space
    assert clean_title(" two\n\nlines\r\tand\u2028more ") == "two lines and more"
    assert clean_title("naïve 日本語 ✓") == "naïve 日本語 ✓"
    long = clean_title("word " * 40)
    assert len(long) <= MAX_TITLE_CHARS and long.endswith("…") and long.startswith("word word")
    assert clean_title("") == ""
