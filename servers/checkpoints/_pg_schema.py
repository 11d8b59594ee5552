"""The Postgres store's schema (in schema ``loom``) and the migrations that will take it past version 7.

The tables and columns are SQLite's (:mod:`servers.checkpoints._schema`) at the version where the Postgres store
began, so that one set of queries and index statements serves both, with two additions:

- ``seqs`` holds each session's last ``seq``. An append takes its row lock (an upsert) before numbering its events,
  so appends from several processes to one session are numbered one after the other, in the database, never from
  a process's memory.
- ``events.call_id`` is the call id of a ``tool_call_finished`` event, written by the append, so the lookup of one
  tool result is an index probe without parsing JSON in the server (a body holding a lone surrogate's escape,
  which SQLite keeps, is not valid ``jsonb`` input).

Real, not SQLite's affinity: ``DOUBLE PRECISION`` for times (Postgres's ``REAL`` is 4 bytes) and ``BIGINT`` for
numbers SQLite stores as 64-bit integers. Flags stay integers, so that the shared clauses (``archived=0``) hold.
"""

from __future__ import annotations

__all__ = ["PG_BASE_VERSION", "PG_MIGRATIONS", "PG_SCHEMA", "SCHEMA_NAME", "open_lock_key"]

SCHEMA_NAME = "loom"

PG_BASE_VERSION = 7
"""The schema version a new Postgres store is created at (the SQLite schema's version when it began)."""

PG_SCHEMA = f"""
CREATE SCHEMA IF NOT EXISTS {SCHEMA_NAME};
CREATE TABLE IF NOT EXISTS {SCHEMA_NAME}.meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS {SCHEMA_NAME}.sessions (
    id TEXT PRIMARY KEY, created DOUBLE PRECISION NOT NULL, cwd TEXT NOT NULL, model TEXT NOT NULL,
    mode TEXT NOT NULL DEFAULT 'bypass', archived INTEGER NOT NULL DEFAULT 0, context_window BIGINT,
    title TEXT NOT NULL DEFAULT '', parent_session_id TEXT NOT NULL DEFAULT '',
    parent_run_id TEXT NOT NULL DEFAULT '', agent TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS sessions_by_parent ON {SCHEMA_NAME}.sessions (parent_session_id)
    WHERE parent_session_id != '';
CREATE TABLE IF NOT EXISTS {SCHEMA_NAME}.runs (
    id TEXT PRIMARY KEY, session_id TEXT NOT NULL, started DOUBLE PRECISION NOT NULL, finished DOUBLE PRECISION,
    status TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '', final_text TEXT NOT NULL DEFAULT '',
    model TEXT NOT NULL, owner TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS runs_by_session ON {SCHEMA_NAME}.runs (session_id, started);
CREATE TABLE IF NOT EXISTS {SCHEMA_NAME}.seqs (session_id TEXT PRIMARY KEY, last_seq BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS {SCHEMA_NAME}.events (
    session_id TEXT NOT NULL, seq BIGINT NOT NULL, run_id TEXT, type TEXT NOT NULL,
    ts DOUBLE PRECISION NOT NULL, body TEXT NOT NULL, call_id TEXT,
    PRIMARY KEY (session_id, seq)
);
CREATE INDEX IF NOT EXISTS events_by_run ON {SCHEMA_NAME}.events (run_id, seq);
CREATE INDEX IF NOT EXISTS events_by_call ON {SCHEMA_NAME}.events (session_id, call_id, seq)
    WHERE call_id IS NOT NULL;
CREATE TABLE IF NOT EXISTS {SCHEMA_NAME}.snapshots (
    session_id TEXT NOT NULL, checkpoint TEXT NOT NULL, path TEXT NOT NULL,
    existed INTEGER NOT NULL, content BYTEA, ts DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (session_id, checkpoint, path)
);
INSERT INTO {SCHEMA_NAME}.meta VALUES ('schema_version', '{PG_BASE_VERSION}') ON CONFLICT (key) DO NOTHING;
"""
"""A new store at `PG_BASE_VERSION`; run under the open lock, it leaves an existing store's tables as they are."""

PG_MIGRATIONS: dict[int, tuple[str, ...]] = {}
"""Statements that bring a Postgres store from the previous schema version to the key's version.

Every SQLite migration past `PG_BASE_VERSION` needs its Postgres twin here (a test holds them to it).
"""


def open_lock_key() -> int:
    """The advisory lock that serialises creating and migrating the store among processes opening it at once."""
    # A fixed 64-bit number: "loom" in ASCII, then the schema's role (1: creation and migration).
    return 0x6C6F6F6D_00000001
