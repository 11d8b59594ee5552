"""Where Loom keeps its state: ``$LOOM_HOME``, or ``~/.loom``.

Its own module, imported by the configuration and by the policy's rule files alike, so that neither
has to import the other.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

__all__ = ["DB_NAME", "MEMORY_DB_NAME", "loom_home", "make_private"]

logger = logging.getLogger(__name__)

DB_NAME = "loom.db"
"""The store's file in ``$LOOM_HOME``: every session's events."""
MEMORY_DB_NAME = "memory.db"
"""The memory server's file in ``$LOOM_HOME``: notes of every namespace."""


def loom_home() -> Path:
    """``$LOOM_HOME``, or ``~/.loom``."""
    env = os.environ.get("LOOM_HOME")
    return Path(env).expanduser() if env else Path.home() / ".loom"


def make_private(home: Path) -> list[str]:
    """Tighten an existing home to owner-only: the directory 0700, its databases (and their WAL files) 0600.

    Loom has created them private since issue 12; a home an older Loom made 0755 / 0644 (the event log holds
    every prompt and file the model read) is tightened the first time a runtime opens it. Only what this user
    owns is changed; each change is logged.

    Returns:
        What was tightened: ``HOME 0755 -> 0700`` for the directory, ``NAME 0644 -> 0600`` for a file in it.
    """
    changed: list[str] = []
    names = [f"{db}{suffix}" for db in (DB_NAME, MEMORY_DB_NAME) for suffix in ("", "-wal", "-shm")]
    for path, private in [(home, 0o700), *((home / name, 0o600) for name in names)]:
        try:
            found = os.lstat(path)
        except OSError:
            continue
        mode = stat.S_IMODE(found.st_mode)
        kind_ok = stat.S_ISDIR(found.st_mode) if path == home else stat.S_ISREG(found.st_mode)
        if not kind_ok or found.st_uid != os.getuid() or not mode & 0o077:
            continue
        try:
            os.chmod(path, mode & private)
        except OSError as exc:
            logger.warning("cannot make %s private (%s); others may read it", path, exc.strerror or exc)
            continue
        changed.append(f"{path.name if path != home else path} {mode:04o} -> {mode & private:04o}")
    if changed:  # one line however many files: a user is told once, and what changed
        logger.warning("made Loom's home private (it holds every session's prompts and files): %s", ", ".join(changed))
    return changed
