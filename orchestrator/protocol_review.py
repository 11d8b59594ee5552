"""The face's results for a review: a verdict and findings that each point at a file and line.

Part of the face's protocol like :mod:`orchestrator.protocol` (``docs/protocol.md`` lists them). Only pydantic is
imported, so a client pays for nothing else.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

__all__ = ["ReviewFinding", "ReviewInfo"]


class ReviewFinding(BaseModel):
    """One problem the reviewer found."""

    file: str = ""
    """The file, relative to the reviewed directory (empty: none given, or one outside the tree, which is refused)."""
    line: int | None = None
    """The line in that file, from 1 (None: none given)."""
    severity: Literal["error", "warning", "note"] = "warning"
    """``error``: must be fixed; ``warning``: should be; ``note``: for information."""
    message: str
    """What is wrong, one line."""


class ReviewInfo(BaseModel):
    """Where a review is, and once it has ended its verdict."""

    status: Literal["reviewed", "running", "failed", "nothing_to_review"]
    """``reviewed``: the verdict is in; ``running``: the reviewer is still at it (``review_result`` waits for it);
    ``failed``: the reviewer's run did not finish (``detail`` says why; never a pass); ``nothing_to_review``: no
    change under the directory, and no reviewer was started."""
    verdict: Literal["pass", "changes_needed", ""] = ""
    """Set when ``reviewed``: ``changes_needed`` also when the reviewer's answer could not be read."""
    findings: list[ReviewFinding] = Field(default_factory=list[ReviewFinding])
    target: str = ""
    """What was reviewed, as a person reads it (``the uncommitted changes``, ``the changes main..HEAD``, a run)."""
    cwd: str = ""
    """The reviewed directory; findings' paths are relative to it."""
    files: list[str] = Field(default_factory=list[str])
    """The files the change touches (untracked ones included), bounded."""
    session_id: str = ""
    """The reviewer's parent: the session given, or the review session made for it."""
    reviewer_session_id: str = ""
    """The reviewer child's session (``loom attach`` shows its work)."""
    run_id: str = ""
    """The reviewer's run: pass it to ``review_result``."""
    run_status: str = ""
    """The reviewer run's own status (``awaiting_approval`` while it waits for one)."""
    detail: str = ""
    """One sentence on what happened: why nothing was reviewed, why it failed, what was cut."""
