"""What Loom's SQLite-backed servers (checkpoints, memory) share: handing tools their database, and its default place.

A database that cannot be opened must not stop the server: its lifespan yields an :class:`Opened`
holding the reason, and every tool answers with it, so a stdio client reads a message rather than a
closed pipe.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

import aiosqlite
import anyio
from mcp.server.mcpserver.exceptions import ToolError

__all__ = ["Opened", "close_shielded", "default_database", "enable_wal", "make_private"]

WAL_ATTEMPTS = 100
WAL_RETRY_S = 0.05

DB = TypeVar("DB")


@dataclass
class Opened(Generic[DB]):
    """What a lifespan hands to the tools: the open database, or why it could not be opened."""

    db: DB | None
    error: str = ""

    def require(self) -> DB:
        """The database, or a tool error carrying the reason it could not be opened."""
        if self.db is None:
            raise ToolError(self.error)
        return self.db


def default_database(name: str) -> Path:
    """``$LOOM_HOME/name``, or ``~/.loom/name`` (servers import nothing from the orchestrator's config)."""
    home = os.environ.get("LOOM_HOME")
    return (Path(home).expanduser() if home else Path.home() / ".loom") / name


async def enable_wal(conn: aiosqlite.Connection) -> None:
    """Put the database in WAL mode, waiting out another connection doing the same to a new file.

    SQLite's busy timeout does not cover the switch of journal mode: when several servers create one
    file at the same moment (two Loom sessions starting on a fresh home, each with its memory server),
    all but one can get "database is locked" at once, although the winner's switch takes milliseconds.
    """
    for attempt in range(WAL_ATTEMPTS):
        try:
            await conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == WAL_ATTEMPTS - 1:
                raise
            await anyio.sleep(WAL_RETRY_S)


async def close_shielded(conn: aiosqlite.Connection | None) -> None:
    """Close a connection even while being cancelled.

    aiosqlite finishes a close on its worker thread; abandoned half-way (a cancelled task, a failure
    unwinding the server), the thread later reports to an event loop that has closed, and prints a
    traceback in the user's terminal.
    """
    if conn is not None:
        with anyio.CancelScope(shield=True):
            await conn.close()


def make_private(path: Path) -> None:
    """Create the database file's directory (0700) and the file itself (0600) if they do not exist yet.

    The file holds every prompt, tool result and note: it must not be readable by other users of the machine.
    SQLite creates its ``-wal`` and ``-shm`` files with the database file's mode, so they follow. Existing
    files keep the mode their owner gave them.
    """
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        return
    os.close(fd)
