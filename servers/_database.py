"""What Loom's SQLite-backed servers (checkpoints, memory) share: handing tools their database, and its default place.

A database that cannot be opened must not stop the server: its lifespan yields an :class:`Opened`
holding the reason, and every tool answers with it, so a stdio client reads a message rather than a
closed pipe.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from mcp.server.mcpserver.exceptions import ToolError

__all__ = ["Opened", "default_database"]

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
