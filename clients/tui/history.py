"""The prompt's history: what was sent before, walked with Up and Down, kept in ``$LOOM_HOME`` (0600).

The file holds one JSON string per line, newest last, and is cut back to its newest :data:`KEEP` entries when it
passes :data:`MAX_BYTES`. Reading and writing it happen in a worker thread (:meth:`PromptHistory.load`,
:meth:`PromptHistory.save`); the walk itself is in memory. While the user walks, the draft they were writing is
kept, and comes back past the newest entry.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

import anyio

__all__ = ["HISTORY_FILE", "KEEP", "MAX_BYTES", "PromptHistory"]

HISTORY_FILE = "tui_history.jsonl"
KEEP = 500
"""Entries read back, and kept when the file is cut."""
MAX_BYTES = 1 << 20
"""Past this size the file is rewritten with only its newest :data:`KEEP` entries."""


class PromptHistory:
    """Entries oldest first, and where the user is in them (``None``: at the draft, below the newest)."""

    def __init__(self, path: Path | None, *, max_bytes: int = MAX_BYTES) -> None:
        self.path = path
        """Where the history is kept; None keeps it for this process only."""
        self.max_bytes = max_bytes
        """Past this size the file is cut to its newest :data:`KEEP` entries."""
        self.entries: list[str] = []
        self._at: int | None = None
        self._draft = ""

    # -- walking ------------------------------------------------------------------------------------

    def older(self, current: str) -> str | None:
        """The entry before the one shown (the newest, from the draft ``current``); None at the oldest."""
        if not self.entries or self._at == 0:
            return None
        if self._at is None:
            self._draft, self._at = current, len(self.entries)
        self._at -= 1
        return self.entries[self._at]

    def newer(self) -> str | None:
        """The entry after the one shown, or the draft past the newest; None when not walking."""
        if self._at is None:
            return None
        self._at += 1
        if self._at >= len(self.entries):
            self._at = None
            return self._draft
        return self.entries[self._at]

    def reset(self) -> None:
        """Stop walking (the user typed, or sent): the next Up starts from the newest again."""
        self._at = None

    @property
    def walking(self) -> bool:
        """Whether an entry (not the draft) is shown."""
        return self._at is not None

    # -- keeping ------------------------------------------------------------------------------------

    def add(self, text: str) -> bool:
        """Remember a sent text (not twice in a row); True when it was new."""
        self._at = None
        if self.entries and self.entries[-1] == text:
            return False
        self.entries.append(text)
        del self.entries[: -2 * KEEP]
        return True

    async def load(self) -> None:
        """Read the kept history (a missing or unreadable file is an empty history)."""
        if self.path is not None:
            loaded = await anyio.to_thread.run_sync(_read, self.path)
            self.entries = loaded + self.entries

    async def save(self, text: str) -> None:
        """Append ``text`` to the kept history (rewriting the file, cut to :data:`KEEP`, once it has grown)."""
        if self.path is not None:
            await anyio.to_thread.run_sync(_append, self.path, text, self.max_bytes)


def _read(path: Path) -> list[str]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    entries: list[str] = []
    for line in lines[-KEEP:]:
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            if isinstance(entry, str):
                entries.append(entry)
    return entries


def _append(path: Path, text: str, max_bytes: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    # Created 0600: messages can hold anything a user pasted. O_APPEND keeps two TUIs' lines whole.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.fchmod(fd, 0o600)  # a file made before (or by hand) with wider permissions is made private too
    with os.fdopen(fd, "a", encoding="utf-8") as out:
        out.write(json.dumps(text, ensure_ascii=False) + "\n")
        size = out.tell()
    if size > max_bytes:
        kept = _read(path)
        tmp = path.with_name(path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.writelines(json.dumps(e, ensure_ascii=False) + "\n" for e in kept)
        os.replace(tmp, path)
