"""Where Loom keeps its state: ``$LOOM_HOME``, or ``~/.loom``.

Its own module, imported by the configuration and by the policy's rule files alike, so that neither
has to import the other.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["DB_NAME", "MEMORY_DB_NAME", "loom_home"]

DB_NAME = "loom.db"
"""The store's file in ``$LOOM_HOME``: every session's events."""
MEMORY_DB_NAME = "memory.db"
"""The memory server's file in ``$LOOM_HOME``: notes of every namespace."""


def loom_home() -> Path:
    """``$LOOM_HOME``, or ``~/.loom``."""
    env = os.environ.get("LOOM_HOME")
    return Path(env).expanduser() if env else Path.home() / ".loom"
