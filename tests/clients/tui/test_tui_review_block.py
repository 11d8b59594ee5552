"""A review's verdict as a block: each finding ``path:line: severity: message``, errors and warnings coloured.

The block is made from the face's ``ReviewInfo`` (fixed here, without a daemon); one picture
(pytest-textual-snapshot) of a verdict with findings under the reviewer's child block.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from rich.text import Text
from textual.pilot import Pilot

from clients.tui.review_view import MAX_SHOWN, ReviewBlock
from orchestrator.protocol_review import ReviewFinding, ReviewInfo
from tests.clients.tui.scenes import ConversationApp, child_finished, child_started, settle, user

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

SnapCompare = Callable[..., bool]
REVIEWER = "s_5e5e5e5e5e5e"


def changes_needed(findings: list[ReviewFinding] | None = None) -> ReviewInfo:
    return ReviewInfo(
        status="reviewed",
        verdict="changes_needed",
        target="the uncommitted changes",
        cwd="/work/project",
        files=["calc.py", "README.md"],
        reviewer_session_id=REVIEWER,
        run_id="r_review",
        findings=findings
        if findings is not None
        else [
            ReviewFinding(file="calc.py", line=2, severity="error", message="subtracts instead of adding"),
            ReviewFinding(file="calc.py", line=9, severity="warning", message="no test covers a negative total"),
            ReviewFinding(file="README.md", severity="note", message="the example still shows the old output"),
            ReviewFinding(severity="warning", message="the change has no changelog entry"),
        ],
    )


class ReviewedApp(ConversationApp):
    """The conversation with the reviewer's child block, then the verdict added as ``/review`` adds it."""

    def __init__(self, info: ReviewInfo) -> None:
        super().__init__(
            [
                user("r_1", "fix the calculator"),
                child_started("", REVIEWER, "reviewer", "Review the uncommitted changes in /work/project"),
                child_finished("", REVIEWER, "completed", answer="Reviewed: changes needed.", steps=4),
            ]
        )
        self.info = info

    def on_mount(self) -> None:
        # Textual calls this before ConversationApp's own handler: the verdict comes after the events it shows.
        self.call_later(self.conversation.add_block, lambda: ReviewBlock(self.info))


def _block(app: ConversationApp) -> ReviewBlock:
    blocks = list(app.query(ReviewBlock))
    assert len(blocks) == 1
    return blocks[0]


async def test_findings_read_path_line_severity_message_and_errors_stand_out() -> None:
    app = ReviewedApp(changes_needed())
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        block = _block(app)
        assert block.text.splitlines() == [
            "» review of the uncommitted changes: changes needed  (4 findings, 1 must be fixed)",
            "calc.py:2: error: subtracts instead of adding",
            "calc.py:9: warning: no test covers a negative total",
            "README.md: note: the example still shows the old output",
            "warning: the change has no changelog entry",
            f"reviewer: {REVIEWER} (its block above opens its session)",
        ]
        content = block.content
        assert isinstance(content, Text)
        styles = {content.plain[s.start : s.end].strip(): str(s.style) for s in content.spans}
        assert styles["calc.py:2: error: subtracts instead of adding"] == "bold red"
        assert styles["calc.py:9: warning: no test covers a negative total"] == "yellow"
        assert block.has_class("-changes-needed")


async def test_a_pass_a_failed_review_and_a_hostile_flood_of_findings() -> None:
    passed = ReviewInfo(status="reviewed", verdict="pass", target="the changes main..HEAD", run_id="r_2")
    failed = ReviewInfo(status="failed", target="the uncommitted changes", detail="the reviewer's run ended cancelled")
    flood = [
        ReviewFinding(file="a.py\x1b[2J", line=n + 1, severity="error", message=f"bad \x1b]0;title\x07{n}\nmore")
        for n in range(MAX_SHOWN + 7)
    ]
    texts = []
    for info in (passed, failed, changes_needed(flood)):
        app = ReviewedApp(info)
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            texts.append(_block(app).text)
    assert texts[0].splitlines() == ["» review of the changes main..HEAD: pass  (no findings)"]
    assert texts[1].splitlines() == [
        "» review of the uncommitted changes: no verdict",
        "the reviewer's run ended cancelled",
    ]
    lines = texts[2].splitlines()
    assert lines[1] == "a.py [2J:1: error: bad ]0;title 0" and "\x1b" not in texts[2] and "\x07" not in texts[2]
    assert len(lines) == 1 + MAX_SHOWN + 2 and lines[-2] == "… 7 more (loom review prints them all)"


def test_a_review_block_picture(snap_compare: SnapCompare) -> None:
    async def shown(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        await pilot.pause(0.1)

    assert snap_compare(ReviewedApp(changes_needed()), terminal_size=(100, 30), run_before=shown)
