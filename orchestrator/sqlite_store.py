"""The embedded store: SQLite in WAL mode through aiosqlite.

Each ``append`` is one SQL statement in autocommit mode (a multi-row INSERT is atomic on its own),
so the hot path costs one round trip to the database thread per batch. Events that change the
session/run index add a short explicit transaction; they happen a few times per run, not per step.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import aiosqlite
import anyio

from orchestrator.events import EVENT_ADAPTER, Event, RunFinished, RunStarted, SessionArchived, SessionCreated
from orchestrator.store import RunRecord, SessionRecord, StoreError

SCHEMA_VERSION = 3

_SCHEMA = """
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

_MIGRATIONS: dict[int, tuple[str, ...]] = {
    2: (
        "ALTER TABLE sessions ADD COLUMN mode TEXT NOT NULL DEFAULT 'bypass'",
        "ALTER TABLE sessions ADD COLUMN archived INTEGER NOT NULL DEFAULT 0",
    ),
    3: ("ALTER TABLE runs ADD COLUMN owner TEXT NOT NULL DEFAULT ''",),
}
"""Statements that bring a database from the previous schema version to the key's version."""

_AUTOCHECKPOINT_PAGES = 20_000

# SQLite caps host parameters per statement (32766 on modern builds); 6 per row keeps us far below.
_MAX_ROWS_PER_INSERT = 500


class SqliteStore:
    """:class:`~orchestrator.store.Store` on one SQLite file, for a single writing process."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._conn: aiosqlite.Connection | None = None
        self._last_seq: dict[str, int] = {}

    async def __aenter__(self) -> Self:
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = await aiosqlite.connect(self._path, isolation_level=None)
            await self._conn.execute("PRAGMA journal_mode=WAL")
            # NORMAL in WAL mode never corrupts the database; a power cut may lose the last commits.
            await self._conn.execute("PRAGMA synchronous=NORMAL")
            await self._conn.execute("PRAGMA busy_timeout=5000")
            # SQLite's default checkpoints the WAL inside whichever commit crosses 1000 pages, stalling
            # that step for 10-20 ms. We checkpoint when a run finishes instead; the larger automatic
            # threshold only bounds the WAL for very long runs.
            await self._conn.execute(f"PRAGMA wal_autocheckpoint={_AUTOCHECKPOINT_PAGES}")
            await self._conn.executescript(_SCHEMA)
            await self._check_version()
        except (sqlite3.Error, OSError) as exc:
            await self.aclose()
            raise StoreError(f"cannot open the Loom database at {self._path}: {exc}") from exc
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.aclose()
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection; safe to call twice."""
        if self._conn is not None:
            conn, self._conn = self._conn, None
            await conn.close()

    @property
    def _db(self) -> aiosqlite.Connection:
        if self._conn is None:
            raise StoreError("the store is not open")
        return self._conn

    async def _check_version(self) -> None:
        async with self._db.execute("SELECT value FROM meta WHERE key='schema_version'") as cur:
            row = await cur.fetchone()
        if row is None:
            await self._db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            return
        found = int(row[0])
        if found > SCHEMA_VERSION:
            raise StoreError(
                f"the database was written by a newer Loom (schema {found} > {SCHEMA_VERSION}); upgrade Loom"
            )
        for version in range(found + 1, SCHEMA_VERSION + 1):
            await self._db.execute("BEGIN IMMEDIATE")
            try:
                for statement in _MIGRATIONS[version]:
                    await self._db.execute(statement)
                await self._db.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(version),))
                await self._db.execute("COMMIT")
            except BaseException:
                await self._db.execute("ROLLBACK")
                raise

    async def _next_seq(self, session_id: str) -> int:
        last = self._last_seq.get(session_id)
        if last is None:
            async with self._db.execute("SELECT MAX(seq) FROM events WHERE session_id=?", (session_id,)) as cur:
                row = await cur.fetchone()
            last = int(row[0]) if row is not None and row[0] is not None else 0
        return last + 1

    async def append(self, events: Sequence[Event]) -> None:
        """See :meth:`orchestrator.store.Store.append`."""
        if not events:
            return
        planned: dict[str, int] = {}
        rows: list[tuple[Any, ...]] = []
        for event in events:
            if event.type == "text_delta":
                raise ValueError("live-only events are not stored")
            sid = event.session_id
            seq = planned.get(sid) or await self._next_seq(sid)
            planned[sid] = seq + 1
            event.seq = seq
            rows.append((sid, seq, getattr(event, "run_id", None), event.type, event.ts, event.model_dump_json()))
        indexed = [e for e in events if isinstance(e, SessionCreated | SessionArchived | RunStarted | RunFinished)]
        try:
            if indexed or len(rows) > _MAX_ROWS_PER_INSERT:
                await self._append_in_transaction(rows, indexed)
            else:
                await self._insert_rows(rows)
        except sqlite3.Error as exc:
            self._forget(events)
            raise StoreError(f"could not write to the Loom database at {self._path}: {exc}") from exc
        except BaseException:
            self._forget(events)  # cancelled mid-write: the row may or may not be there; recount next time
            raise
        for sid, nxt in planned.items():
            self._last_seq[sid] = nxt - 1

    def _forget(self, events: Sequence[Event]) -> None:
        for event in events:
            event.seq = None
            self._last_seq.pop(event.session_id, None)

    async def _insert_rows(self, rows: list[tuple[Any, ...]]) -> None:
        for start in range(0, len(rows), _MAX_ROWS_PER_INSERT):
            chunk = rows[start : start + _MAX_ROWS_PER_INSERT]
            values = ",".join(["(?,?,?,?,?,?)"] * len(chunk))
            await self._db.execute(f"INSERT INTO events VALUES {values}", [v for row in chunk for v in row])

    async def _append_in_transaction(
        self,
        rows: list[tuple[Any, ...]],
        indexed: Sequence[SessionCreated | SessionArchived | RunStarted | RunFinished],
    ) -> None:
        db = self._db
        await db.execute("BEGIN IMMEDIATE")
        try:
            await self._insert_rows(rows)
            for event in indexed:
                if isinstance(event, SessionCreated):
                    await db.execute(
                        "INSERT INTO sessions (id, created, cwd, model, mode) VALUES (?,?,?,?,?)",
                        (event.session_id, event.ts, event.cwd, event.model, event.mode),
                    )
                elif isinstance(event, SessionArchived):
                    await db.execute("UPDATE sessions SET archived=1 WHERE id=?", (event.session_id,))
                elif isinstance(event, RunStarted):
                    await db.execute(
                        "INSERT INTO runs (id, session_id, started, status, model, owner) VALUES (?,?,?,?,?,?)",
                        (event.run_id, event.session_id, event.ts, "running", event.model, event.owner),
                    )
                elif isinstance(event, RunFinished):
                    await db.execute(
                        "UPDATE runs SET finished=?, status=?, reason=?, final_text=? WHERE id=?",
                        (event.ts, event.status, event.reason, event.final_text, event.run_id),
                    )
            await db.execute("COMMIT")
        except BaseException:
            await db.execute("ROLLBACK")
            raise
        if any(isinstance(e, RunFinished) for e in indexed):
            # between runs is the cheap moment to fold the WAL back; PASSIVE never blocks readers
            await db.execute("PRAGMA wal_checkpoint(PASSIVE)")

    async def read_events(
        self, session_id: str, *, after_seq: int = 0, run_id: str | None = None, limit: int | None = None
    ) -> list[Event]:
        """See :meth:`orchestrator.store.Store.read_events`."""
        sql = "SELECT body FROM events WHERE session_id=? AND seq>?"
        params: list[Any] = [session_id, after_seq]
        if run_id is not None:
            sql += " AND run_id=?"
            params.append(run_id)
        sql += " ORDER BY seq"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        async with self._db.execute(sql, params) as cur:
            rows = await cur.fetchall()
        return [EVENT_ADAPTER.validate_json(row[0]) for row in rows]

    async def get_session(self, session_id: str) -> SessionRecord | None:
        """See :meth:`orchestrator.store.Store.get_session`."""
        sessions = await self._select_sessions("WHERE id=?", (session_id,))
        return sessions[0] if sessions else None

    async def list_sessions(self, *, include_archived: bool = False, limit: int = 100) -> list[SessionRecord]:
        """See :meth:`orchestrator.store.Store.list_sessions`."""
        where = "" if include_archived else "WHERE archived=0 "
        return await self._select_sessions(where + "ORDER BY created DESC LIMIT ?", (limit,))

    async def _select_sessions(self, clause: str, params: tuple[Any, ...]) -> list[SessionRecord]:
        sql = (
            "SELECT id, created, cwd, model, mode, archived, "
            "(SELECT COALESCE(MAX(seq),0) FROM events WHERE session_id=s.id) FROM sessions s " + clause
        )
        async with self._db.execute(sql, params) as cur:
            rows = await cur.fetchall()
        return [
            SessionRecord(id=r[0], created=r[1], cwd=r[2], model=r[3], mode=r[4], archived=bool(r[5]), last_seq=r[6])
            for r in rows
        ]

    async def list_runs_with_status(self, status: str) -> list[RunRecord]:
        """Every run currently in ``status`` (e.g. the ``running`` ones left by a crash)."""
        return await self._select_runs("WHERE status=? ORDER BY started", (status,))

    async def get_run(self, run_id: str) -> RunRecord | None:
        """See :meth:`orchestrator.store.Store.get_run`."""
        runs = await self._select_runs("WHERE id=?", (run_id,))
        return runs[0] if runs else None

    async def list_runs(self, session_id: str | None = None, limit: int = 50) -> list[RunRecord]:
        """See :meth:`orchestrator.store.Store.list_runs`."""
        if session_id is None:
            return await self._select_runs("ORDER BY started DESC LIMIT ?", (limit,))
        return await self._select_runs("WHERE session_id=? ORDER BY started DESC LIMIT ?", (session_id, limit))

    async def find_run(self, prefix: str) -> RunRecord | None:
        """The run whose id starts with ``prefix``, if exactly one does (for CLI convenience)."""
        escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        runs = await self._select_runs("WHERE id LIKE ? ESCAPE '\\' LIMIT 2", (escaped + "%",))
        return runs[0] if len(runs) == 1 else None

    async def _select_runs(self, clause: str, params: tuple[Any, ...]) -> list[RunRecord]:
        sql = "SELECT id, session_id, started, finished, status, reason, final_text, model, owner FROM runs " + clause
        async with self._db.execute(sql, params) as cur:
            rows = await cur.fetchall()
        return [
            RunRecord(
                id=r[0],
                session_id=r[1],
                started=r[2],
                finished=r[3],
                status=r[4],
                reason=r[5],
                final_text=r[6],
                model=r[7],
                owner=r[8],
            )
            for r in rows
        ]
