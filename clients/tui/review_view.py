"""A review's verdict in the conversation: pass or changes needed, and each finding at its file and line.

``/review`` starts a reviewer child of the shown session (its child block shows it working) and, once the face's
``review_result`` has the verdict, shows it as this block. Findings read ``path:line: severity: message``, the form
``loom review`` prints and editors jump to; errors are red, warnings yellow. Everything in it is the face's
:class:`~orchestrator.protocol_review.ReviewInfo`, and every text in it came from a model: it is cleaned of
control characters before it is drawn.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from clients.timeline import first_line
from orchestrator.protocol_review import ReviewFinding, ReviewInfo

__all__ = ["MAX_SHOWN", "ReviewBlock", "finding_line"]

MAX_SHOWN = 50
"""Findings drawn in the block; the rest are counted (``loom review`` prints them all)."""

_SEVERITY = {"error": "bold red", "warning": "yellow", "note": "dim"}


def finding_line(finding: ReviewFinding) -> str:
    """A finding as ``path:line: severity: message`` (``path: ...`` with no line, ``severity: ...`` with no file)."""
    path = first_line(finding.file, 200)
    place = f"{path}:{finding.line}: " if path and finding.line else f"{path}: " if path else ""
    return f"{place}{finding.severity}: {first_line(finding.message, 300)}"


class ReviewBlock(Static):
    """The verdict of one review and its findings (or why there is no verdict)."""

    DEFAULT_CSS = """
    ReviewBlock {
        padding: 0 1;
        border-left: thick $success;
    }
    ReviewBlock.-changes-needed {
        border-left: thick $error;
    }
    ReviewBlock.-failed {
        border-left: thick $warning;
    }
    """

    def __init__(self, info: ReviewInfo) -> None:
        self.info = info
        kind = "failed" if info.status != "reviewed" else "pass" if info.verdict == "pass" else "changes-needed"
        super().__init__(self._content(), classes=f"-{kind}")

    @property
    def text(self) -> str:
        """What the block says, as plain text."""
        return self._content().plain

    def _content(self) -> Text:
        info = self.info
        target = first_line(info.target) or "the changes"
        line = Text(f"» review of {target}: ", style="bold")
        if info.status != "reviewed":
            line.append("no verdict", style="bold yellow")
            line.append(f"\n{first_line(info.detail, 300) or 'the reviewer did not finish'}", style="yellow")
        else:
            passed = info.verdict == "pass"
            line.append("pass" if passed else "changes needed", style="bold green" if passed else "bold red")
            errors = sum(f.severity == "error" for f in info.findings)
            counted = f"{len(info.findings)} finding{'s' if len(info.findings) != 1 else ''}"
            line.append(f"  ({counted}, {errors} must be fixed)" if info.findings else "  (no findings)", style="dim")
            for finding in info.findings[:MAX_SHOWN]:
                line.append("\n" + finding_line(finding), style=_SEVERITY.get(finding.severity, ""))
            if len(info.findings) > MAX_SHOWN:
                line.append(f"\n… {len(info.findings) - MAX_SHOWN} more (loom review prints them all)", style="dim")
            if info.detail:
                line.append(f"\n{first_line(info.detail, 300)}", style="italic")
        if info.reviewer_session_id:
            line.append(f"\nreviewer: {info.reviewer_session_id} (its block above opens its session)", style="dim")
        return line
