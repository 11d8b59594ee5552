"""The checkpoint database's schema and the migrations that bring an older file up to it.

A new file is created at the version-3 base below and migrated like an old one, so that new and migrated
databases cannot differ.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "BASE_SCHEMA",
    "CALL_ID",
    "CALL_INDEX",
    "MIGRATIONS",
    "RUNS_SELECT",
    "RUN_KEYS",
    "SCHEMA_VERSION",
    "SESSIONS_SELECT",
    "session_row",
]

SCHEMA_VERSION = 7
MAX_INT = 2**63 - 1
"""SQLite's largest integer: a seq or limit past it cannot be bound, so the tools refuse it as bad input."""

BASE_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY, created REAL NOT NULL, cwd TEXT NOT NULL, model TEXT NOT NULL,
    mode TEXT NOT NULL DEFAULT 'bypass', archived INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY, session_id TEXT NOT NULL, started REAL NOT NULL, finished REAL,
    status TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '', final_text TEXT NOT NULL DEFAULT '',
    model TEXT NOT NULL, owner TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS runs_by_session ON runs (session_id, started);
CREATE TABLE IF NOT EXISTS events (
    session_id TEXT NOT NULL, seq INTEGER NOT NULL, run_id TEXT, type TEXT NOT NULL,
    ts REAL NOT NULL, body TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS events_by_run ON events (run_id, seq);
"""
"""Version 3 of the schema, as the orchestrator's own store created it; migrations take it on from there."""

CALL_INDEX = "events_by_call"
CALL_ID = "json_extract(body, '$.call_id')"
"""The call id of a stored event; `CALL_INDEX` indexes it, so the lookup must spell it the same way."""

MIGRATIONS: dict[int, tuple[str, ...]] = {
    2: (
        "ALTER TABLE sessions ADD COLUMN mode TEXT NOT NULL DEFAULT 'bypass'",
        "ALTER TABLE sessions ADD COLUMN archived INTEGER NOT NULL DEFAULT 0",
    ),
    3: ("ALTER TABLE runs ADD COLUMN owner TEXT NOT NULL DEFAULT ''",),
    4: (
        # A file's content as it was when a checkpoint was taken, so that a rewind can restore it.
        # ``existed = 0`` records that the file did not exist (a rewind deletes it). A rowid table,
        # unlike ``events``: SQLite advises against WITHOUT ROWID for rows as large as file contents.
        "CREATE TABLE IF NOT EXISTS snapshots ("
        " session_id TEXT NOT NULL, checkpoint TEXT NOT NULL, path TEXT NOT NULL,"
        " existed INTEGER NOT NULL, content BLOB, ts REAL NOT NULL,"
        " PRIMARY KEY (session_id, checkpoint, path))",
    ),
    5: (
        # The window of the model a switch chose (NULL until a switch): a listed session's gauge is measured
        # against it even before the new model's first watermark.
        "ALTER TABLE sessions ADD COLUMN context_window INTEGER",
        # Finds one tool result by its call id (see `Database.find_tool_result`) without parsing every
        # result the session holds: 75 ms for 10,000 results of 2 KB without it, under 1 ms with it. Partial,
        # so that only tool results pay for it when written (about one JSON parse of the body each).
        f"CREATE INDEX IF NOT EXISTS {CALL_INDEX} ON events (session_id, {CALL_ID}) WHERE type='tool_call_finished'",
    ),
    6: (
        # A person's name for the session (``rename_session``); empty until one is given. Not an event: it is a
        # label, and changing it changes nothing a run sees.
        "ALTER TABLE sessions ADD COLUMN title TEXT NOT NULL DEFAULT ''",
    ),
    7: (
        # A child session's place in the tree (started by a subagents tool): its parent session and the parent's
        # run, and the agent definition it runs as. Empty for a top-level session. Indexed: a parent's children
        # are listed whenever its run ends (to cancel those still going) and when a client shows the tree.
        "ALTER TABLE sessions ADD COLUMN parent_session_id TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE sessions ADD COLUMN parent_run_id TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE sessions ADD COLUMN agent TEXT NOT NULL DEFAULT ''",
        "CREATE INDEX IF NOT EXISTS sessions_by_parent ON sessions (parent_session_id) WHERE parent_session_id != ''",
    ),
}
"""Statements that bring a database from the previous schema version to the key's version."""


# -- what the session and run listings read (the same SQL on SQLite and Postgres) ---------------------------------

# The latest watermark is found walking the session's events back from the newest: every model call writes one, so
# the walk is a few rows long. The newest run's status and owner come the same way, through ``runs_by_session``:
# what a list shows as the session's status (failed, interrupted) without a query per session.
SESSIONS_SELECT = (
    "SELECT id, created, cwd, model, mode, archived, context_window, title, parent_session_id, parent_run_id, agent, "
    "(SELECT body FROM events WHERE session_id=s.id AND type='context_watermark' ORDER BY seq DESC LIMIT 1), "
    "(SELECT COALESCE(MAX(seq),0) FROM events WHERE session_id=s.id), "
    "(SELECT status || ' ' || owner FROM runs WHERE session_id=s.id ORDER BY started DESC LIMIT 1) "
    "FROM sessions s "
)
"""Session rows with their last ``seq``, gauge and newest run; a clause (``WHERE``, ``ORDER BY``) follows."""

_SESSION_KEYS = (
    "id",
    "created",
    "cwd",
    "model",
    "mode",
    "archived",
    "context_window",
    "title",
    "parent_session_id",
    "parent_run_id",
    "agent",
    "watermark",
    "last_seq",
    "last_run",
)

RUN_KEYS = ("id", "session_id", "started", "finished", "status", "reason", "final_text", "model", "owner")
RUNS_SELECT = f"SELECT {', '.join(RUN_KEYS)} FROM runs "
"""Run rows as `RUN_KEYS`; a clause follows."""


def session_row(values: Any) -> dict[str, Any]:
    """A row of `SESSIONS_SELECT` as the session the tools answer with (gauge and newest run unpacked)."""
    row = dict(zip(_SESSION_KEYS, values, strict=True))
    mark = json.loads(row.pop("watermark") or "{}")
    row["context_used"] = mark.get("used_tokens")
    row["context_window"] = row["context_window"] or mark.get("window")  # a later switch's window wins
    last_status, _, last_owner = (row.pop("last_run") or "").partition(" ")
    row["last_run_status"], row["last_run_owner"] = last_status or None, last_owner
    return row
