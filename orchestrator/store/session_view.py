"""How a session is shown to a person: its status (what it needs) and its title, made safe for a terminal.

Shared by the face (which knows the runs and approvals of its process), :mod:`orchestrator.store.peek` (which
reads the store alone, for ``loom sessions`` without a daemon) and the clients that print titles. Standard
library only: ``loom sessions`` imports it without pydantic or the SDK.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable

__all__ = ["MAX_TITLE_CHARS", "NEEDS_YOU", "SESSION_STATUSES", "clean_title", "session_status"]

MAX_TITLE_CHARS = 80
"""A title is cut to this many characters: it is a label in a list, not a note."""

SESSION_STATUSES = (
    "running",
    "awaiting_approval",
    "needs_review",
    "failed",
    "interrupted",
    "idle",
    "archived",
)
"""Every status :func:`session_status` gives."""

NEEDS_YOU = frozenset({"awaiting_approval", "needs_review"})
"""The statuses of a session that waits for a person."""

_GOING = frozenset({"running", "queued"})
# Categories a title never keeps: control characters (ESC and the C1 CSI start terminal escape sequences),
# format characters (bidi overrides reorder what is shown), surrogates, private-use and unassigned code points.
_DROPPED = frozenset({"Cc", "Cf", "Cs", "Co", "Cn"})
_SPACES = frozenset({"Zs", "Zl", "Zp"})


def session_status(
    *,
    archived: bool,
    running: bool,
    waiting: Iterable[str] = (),
    last_run_status: str | None = None,
    last_run_live: bool = False,
) -> str:
    """What a session needs, most urgent first; one of :data:`SESSION_STATUSES`.

    Args:
        archived: the session is archived.
        running: a run of it goes on in the process that answers.
        waiting: the kinds (``policy``, ``review``) of the approvals its runs wait for.
        last_run_status: the stored status of its newest run (None: it has none).
        last_run_live: the process recorded as driving that run is alive (a run still marked going whose
            process is gone was interrupted, whatever the store says yet).
    """
    if archived:
        return "archived"
    kinds = set(waiting)
    if "review" in kinds:
        return "needs_review"
    if kinds:
        return "awaiting_approval"
    if running:
        return "running"
    if last_run_status in _GOING:
        return "running" if last_run_live else "interrupted"
    if last_run_status in ("awaiting_approval", "needs_review"):
        # Stored so only while a process waits on it; a run left so with no process behind it needs a resume.
        return last_run_status if last_run_live else "needs_review"
    if last_run_status in ("failed", "interrupted"):
        return last_run_status
    return "idle"


def clean_title(title: str) -> str:
    """``title`` as one safe line: control and format characters dropped, spaces collapsed, cut to the limit.

    Titles come from anyone who can reach the face (another agent, a script), and are printed by the TUI and
    ``loom sessions``: an escape sequence in one must never reach a terminal.
    """
    kept = []
    for char in title:
        category = unicodedata.category(char)
        if category in _SPACES or char in "\t\n\r\v\f":
            kept.append(" ")
        elif category not in _DROPPED:
            kept.append(char)
    flat = " ".join("".join(kept).split())
    return flat if len(flat) <= MAX_TITLE_CHARS else flat[: MAX_TITLE_CHARS - 1].rstrip() + "…"
