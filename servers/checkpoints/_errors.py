"""What the checkpoint database's failures say: the SQLite error, and what to do about it."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["DatabaseError", "describe"]

_ADVICE = {
    "SQLITE_FULL": "the disk is full; free some space and try again",
    "SQLITE_READONLY": "the database is read-only; check the permissions of the file and its directory",
    "SQLITE_BUSY": "another process holds a lock on it; stop that process or try again",
    "SQLITE_LOCKED": "another connection holds a lock on it; try again",
    "SQLITE_CORRUPT": "the file is damaged; move it aside (Loom then starts a new one) and report the problem",
    "SQLITE_NOTADB": "the file is not a Loom database; move it aside or point Loom at another home",
    "SQLITE_CANTOPEN": "check that its directory exists and is writable",
    "SQLITE_IOERR": "the disk reported an error; check the disk and free space",
}


class DatabaseError(Exception):
    """The database could not be opened, read or written; the message says what to do about it."""


def describe(action: str, path: Path, exc: BaseException) -> str:
    """``"{action} the Loom database at {path}: {error}"``, with advice for the common SQLite failures."""
    message = f"{action} the Loom database at {path}: {exc}"
    name = getattr(exc, "sqlite_errorname", "") or ""
    if _on_read_only_filesystem(path):
        # SQLite reports CANTOPEN here (it cannot create the -shm file), which says nothing useful.
        return f"{message} (the filesystem holding it is mounted read-only; remount it read-write or set LOOM_HOME)"
    for prefix, advice in _ADVICE.items():
        if name.startswith(prefix):
            return f"{message} ({advice})"
    return message


def _on_read_only_filesystem(path: Path) -> bool:
    for where in (path, *path.parents):
        try:
            return bool(os.statvfs(where).f_flag & os.ST_RDONLY)
        except OSError:
            continue  # not there yet: ask its parent
    return False
