"""The errors the CLI reports: found inside the exception groups task groups raise, and put in CLI terms.

The face's messages are written for MCP clients, so they name the face's tools (``read_events``,
``list_sessions``); a person at the command line needs the command that does the same thing.
"""

from __future__ import annotations

import re
from typing import TypeVar

__all__ = ["cli_message", "first_of"]

E = TypeVar("E", bound=BaseException)

_FACE_HINTS: tuple[tuple[re.Pattern[str], str], ...] = (
    # The session host's HostError messages: an unknown run (get_run, cancel_run, resume_run), an unknown
    # session (every session tool), and an approval that is not pending (decide_approval).
    (re.compile(r"; read_events or list_sessions show the existing ones"), "; `loom runs` lists them"),
    (re.compile(r"; list_sessions shows the existing ones"), "; `loom sessions` lists them"),
    (re.compile(r"; list_goals shows the goals there are"), "; `loom goals` lists them"),
    (re.compile(r"(is not pending \(unknown, or already decided\))"), r"\1; `loom approvals` lists the pending ones"),
    # create_session's refusal of a model whose key is not set.
    (re.compile(r"; or choose another model$"), "; or choose another model with --model"),
)


def first_of(exc: BaseException, kind: type[E]) -> E | None:
    """``exc`` if it is a ``kind``, else the first ``kind`` anywhere inside it (exception groups)."""
    if isinstance(exc, kind):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = first_of(inner, kind)
            if found is not None:
                return found
    return None


def cli_message(face_message: str) -> str:
    """A face tool's error message with its pointers to face tools replaced by the CLI commands that do the same.

    ``no run 'r_x'; read_events or list_sessions show the existing ones`` becomes
    ``no run 'r_x'; `loom runs` lists them``; other messages pass unchanged.
    """
    for pattern, replacement in _FACE_HINTS:
        changed = pattern.sub(replacement, face_message)
        if changed != face_message:
            return changed
    return face_message
