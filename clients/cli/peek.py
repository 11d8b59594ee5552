"""A read-only look at Loom's database for the listing commands (``loom runs``, ``trace``, ``export``).

Loom's store is the checkpoints MCP server, and reading it the usual way means importing the MCP SDK
(0.6 s) and starting the server in-process: 1.4 s for ``loom runs``, against 0.04 s for ``loom --help``.
A listing only reads, so it
reads the SQLite file itself, opened with ``mode=ro`` (SQLite then refuses every write, and a missing
file is never created), with the standard library alone. The server still owns the schema: this module
answers only for the schema versions it knows, and raises :class:`Unreadable` for anything else, so that
the caller asks the server instead (which migrates an old file, or says a newer Loom wrote it).

The reads mirror the server's ``list_runs``, ``get_run``, ``find_run`` and ``read_events``.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from orchestrator.home import DB_NAME
from orchestrator.runtime.owner import owner_alive

__all__ = ["DB_NAME", "KNOWN_SCHEMAS", "RunRow", "Unreadable", "find_run", "recent_runs", "session_events"]


KNOWN_SCHEMAS = range(3, 6)
"""Schema versions whose ``runs`` and ``events`` tables these reads match; a test keeps the top equal to the
server's ``SCHEMA_VERSION``, so that a schema change cannot pass by this module unnoticed."""

_RUN_COLUMNS = "id, session_id, started, finished, status, reason, model, owner"
_STILL_GOING = frozenset({"running", "queued"})


class Unreadable(Exception):
    """The file is not one this module can read (unknown schema, locked, damaged); ask the server instead."""


class RunRow(NamedTuple):
    """One run as the store indexes it."""

    id: str
    session_id: str
    started: float
    finished: float | None
    status: str
    reason: str
    model: str
    owner: str

    @property
    def shown_status(self) -> str:
        """The status, except that a run still marked going whose process is gone shows as ``interrupted``.

        The store records it so when a process next opens the runtime (``loom resume``, the daemon); a
        listing only reads, and should not show a crashed run as running meanwhile.
        """
        if self.status in _STILL_GOING and not owner_alive(self.owner):
            return "interrupted"
        return self.status

    @property
    def shown_reason(self) -> str:
        """The recorded reason, or why the run shows as interrupted."""
        if self.shown_status != self.status:
            return f"its process is gone (crash or kill); `loom resume {self.id}` continues it"
        return self.reason


@contextlib.contextmanager
def _reading(home: Path) -> Iterator[sqlite3.Connection | None]:
    """A read-only connection to ``home``'s database, or None when there is no database yet.

    Raises:
        Unreadable: the file cannot be opened or has a schema this module does not know.
    """
    path = home / DB_NAME
    if not path.is_file():
        yield None
        return
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise Unreadable(str(exc)) from exc
    try:
        try:
            conn.execute("PRAGMA busy_timeout=5000")
            row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        except sqlite3.Error as exc:
            raise Unreadable(str(exc)) from exc
        version = int(row[0]) if row is not None and str(row[0]).isdigit() else 0
        if version not in KNOWN_SCHEMAS:
            raise Unreadable(f"schema {version}")
        try:
            yield conn
        except sqlite3.Error as exc:
            raise Unreadable(str(exc)) from exc
    finally:
        conn.close()


def _rows(conn: sqlite3.Connection, clause: str, params: tuple[object, ...]) -> list[RunRow]:
    return [RunRow(*row) for row in conn.execute(f"SELECT {_RUN_COLUMNS} FROM runs {clause}", params)]


def recent_runs(home: Path, limit: int) -> list[RunRow]:
    """The most recent runs, newest first (none when there is no database)."""
    with _reading(home) as conn:
        return [] if conn is None else _rows(conn, "ORDER BY started DESC LIMIT ?", (limit,))


def find_run(home: Path, run_id: str) -> RunRow | None:
    """The run with this id, else the only one whose id starts with it, else None."""
    with _reading(home) as conn:
        if conn is None:
            return None
        exact = _rows(conn, "WHERE id=?", (run_id,))
        if exact or not run_id:
            return exact[0] if exact else None
        escaped = run_id.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        found = _rows(conn, "WHERE id LIKE ? ESCAPE '\\' LIMIT 2", (escaped + "%",))
        return found[0] if len(found) == 1 else None


def session_events(home: Path, session_id: str, run_id: str | None = None) -> list[str]:
    """The stored JSON of a session's events (of one run, if given), in ``seq`` order."""
    with _reading(home) as conn:
        if conn is None:
            return []
        sql, params = "SELECT body FROM events WHERE session_id=?", [session_id]
        if run_id is not None:
            sql += " AND run_id=?"
            params.append(run_id)
        return [str(row[0]) for row in conn.execute(sql + " ORDER BY seq", params)]
