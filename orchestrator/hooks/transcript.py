"""The transcript a hook can read: the session's conversation as JSON lines, in Claude Code's transcript shape.

Claude Code gives hooks ``transcript_path``, a JSONL file with one line per message (``{"type": "user",
"message": {"role": "user", "content": [...]}}``), and hooks read it to see what the agent did (a Stop hook that
checks the tests were run, say). Loom writes the same shape to ``$LOOM_HOME/transcripts/SESSION.jsonl`` before
a hook runs, only when the conversation changed since it was last written, in a worker thread. The file is
private to its owner (0600 in a 0700 directory), like the rest of Loom's home; it holds what the model has seen.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import anyio
import anyio.to_thread

from orchestrator.messages import Message

__all__ = ["TRANSCRIPTS", "Transcript"]

TRANSCRIPTS = "transcripts"
"""The directory of ``$LOOM_HOME`` that holds the transcripts (no tool may read it: it holds every session's)."""


class Transcript:
    """One session's transcript file, rewritten when its conversation has changed."""

    def __init__(self, path: Path, history: list[Message]) -> None:
        self.path = path
        self.history = history
        """The session's history (the list itself: the session changes it in place)."""
        self._written: tuple[int, int] | None = None
        self._lock = anyio.Lock()
        """Handlers of one event fire at once; one of them writes, the others find the file up to date."""

    async def refresh(self) -> str:
        """Bring the file up to date with the conversation; returns its path ("" when it cannot be written)."""
        # Messages are only appended, or the whole list replaced (a compaction, a rebuild): its length and the
        # identity of its last message tell whether anything changed.
        async with self._lock:
            mark = (len(self.history), id(self.history[-1]) if self.history else 0)
            if mark == self._written:
                return str(self.path)
            lines = [_line(m) for m in self.history]
            try:
                await anyio.to_thread.run_sync(_write, self.path, lines)
            except OSError:
                return ""
            self._written = mark
            return str(self.path)


def _line(message: Message) -> str:
    content = [block.model_dump(mode="json", exclude_defaults=False) for block in message.content]
    return json.dumps({"type": message.role, "message": {"role": message.role, "content": content}})


def _write(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write("".join(f"{line}\n" for line in lines))
    os.replace(temp, path)
