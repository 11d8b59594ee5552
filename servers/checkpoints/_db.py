"""The checkpoint server's SQLite database: schema, migrations and queries (aiosqlite, WAL mode).

Events arrive as JSON objects and are stored as JSON text next to the columns the queries need
(``session_id``, ``seq``, ``run_id``, ``type``, ``ts``). The server numbers them: ``seq`` counts from
1 per session. A few event types also keep the session and run index in step; this module knows
their field names, nothing else about them.

Each append without index events is one multi-row ``INSERT`` in autocommit mode (atomic on its
own), so the hot path costs one round trip to aiosqlite's thread per batch. A batch with index events
is a transaction: a few round trips more. That is why a step's ``context_watermark`` is not indexed
(indexing it cost about 0.5 ms per model call): a session's gauge is read from its latest watermark
when the session is listed.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiosqlite
import anyio

from servers._database import close_shielded, enable_wal, make_private
from servers.checkpoints._errors import DatabaseError, describe
from servers.checkpoints._schema import (
    BASE_SCHEMA,
    CALL_ID,
    CALL_INDEX,
    MIGRATIONS,
    RUN_KEYS,
    RUNS_SELECT,
    SCHEMA_VERSION,
    SESSIONS_SELECT,
    session_row,
)
from servers.checkpoints._writes import (
    INDEX_TYPES,
    MAX_ROWS_PER_INSERT,
    event_json,
    index_statement,
    insert_statements,
    session_of,
    write_in_transaction,
)

__all__ = ["SCHEMA_VERSION", "Database", "DatabaseError", "describe"]

_AUTOCHECKPOINT_PAGES = 20_000

_CHECKPOINT_AFTER_ROWS = 256
"""Rows appended since the last checkpoint before a run's end folds the WAL back (see ``Database.append``)."""


class Database:
    """One SQLite file, for a single writing process. Open with :meth:`open`, close with :meth:`close`."""

    def __init__(self, path: Path, conn: aiosqlite.Connection, *, read_only: bool) -> None:
        self.path = path
        self.read_only = read_only
        self._conn = conn
        self._last_seq: dict[str, int] = {}
        self._unfolded = 0
        """Rows appended since the last end-of-run checkpoint."""

    @classmethod
    async def open(cls, path: Path, *, read_only: bool = False) -> Database:
        """Open (creating and migrating unless ``read_only``) the database at ``path``.

        Raises:
            DatabaseError: the file cannot be opened, or a newer Loom wrote it.
        """
        conn: aiosqlite.Connection | None = None
        try:
            if read_only:
                conn = await aiosqlite.connect(_read_only_uri(path), uri=True, isolation_level=None)
            else:
                make_private(path)
                conn = await aiosqlite.connect(path, isolation_level=None)
            db = cls(path, conn, read_only=read_only)
            await db._configure()
        except (sqlite3.Error, OSError) as exc:
            await close_shielded(conn)
            raise DatabaseError(describe("cannot open", path, exc)) from exc
        except BaseException:
            await close_shielded(conn)
            raise
        return db

    async def close(self) -> None:
        """Close the connection (it must be closed before the event loop ends)."""
        await close_shielded(self._conn)

    async def _configure(self) -> None:
        db = self._conn
        await db.execute("PRAGMA busy_timeout=5000")
        if self.read_only:
            await self._check_version(migrate=False)
            return
        await enable_wal(db)
        # NORMAL in WAL mode never corrupts the database; a power cut may lose the last commits.
        await db.execute("PRAGMA synchronous=NORMAL")
        # SQLite's default checkpoints the WAL inside whichever commit crosses 1000 pages, stalling
        # that step for 10-20 ms. We checkpoint when a run finishes instead; the larger automatic
        # threshold only bounds the WAL for very long runs.
        await db.execute(f"PRAGMA wal_autocheckpoint={_AUTOCHECKPOINT_PAGES}")
        # One transaction, because several Loom processes may open a new home at once. A new file
        # gets version 3 (the base schema) and the migrations build the rest, so that new and
        # migrated databases cannot differ; an existing file keeps its version (OR IGNORE).
        try:
            await db.executescript(
                f"BEGIN IMMEDIATE; {BASE_SCHEMA} INSERT OR IGNORE INTO meta VALUES ('schema_version', '3'); COMMIT;"
            )
        except BaseException:
            with anyio.CancelScope(shield=True):
                if db.in_transaction:
                    await db.execute("ROLLBACK")
            raise
        await self._check_version(migrate=True)

    async def _has_table(self, name: str) -> bool:
        async with self._conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (name,)) as cur:
            return await cur.fetchone() is not None

    async def schema_version(self) -> int:
        """The version recorded in the file (0 for a file without Loom's tables)."""
        if not await self._has_table("meta"):
            return 0
        async with self._conn.execute("SELECT value FROM meta WHERE key='schema_version'") as cur:
            row = await cur.fetchone()
        return int(row[0]) if row is not None else 0

    async def _check_version(self, *, migrate: bool) -> None:
        found = await self.schema_version()
        if found > SCHEMA_VERSION:
            raise DatabaseError(
                f"the Loom database at {self.path} was written by a newer Loom (schema {found}, this Loom "
                f"knows up to {SCHEMA_VERSION}); upgrade Loom, or point LOOM_HOME elsewhere"
            )
        if found < SCHEMA_VERSION and not migrate:
            raise DatabaseError(
                f"the Loom database at {self.path} has schema {found} and is opened read-only; "
                f"open it once read-write to migrate it to schema {SCHEMA_VERSION}"
            )
        for version in range(found + 1, SCHEMA_VERSION + 1):
            await self._conn.execute("BEGIN IMMEDIATE")
            try:
                if await self.schema_version() < version:  # another process may have migrated meanwhile
                    for statement in MIGRATIONS[version]:
                        await self._conn.execute(statement)
                    await self._conn.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(version),))
                await self._conn.execute("COMMIT")
            except BaseException:
                await self._conn.execute("ROLLBACK")
                raise

    # -- events -----------------------------------------------------------------------------------

    async def append(self, events: Sequence[dict[str, Any]]) -> list[int]:
        """Number ``events`` per session, store them atomically and return their ``seq`` values.

        Raises:
            DatabaseError: nothing of the batch was stored (the message says why).
            ValueError: an event lacks ``session_id``, ``type`` or ``ts``.
        """
        if not events:
            return []
        planned: dict[str, int] = {}
        rows: list[tuple[Any, ...]] = []
        for event in events:
            sid = session_of(event)
            # A session's first event needs no look-up: its id was just made, and were it not new, the
            # primary key refuses seq 1 again and the whole batch fails rather than being numbered on.
            seq = planned.get(sid) or (1 if event["type"] == "session_created" else await self._next_seq(sid))
            planned[sid] = seq + 1
            body = event_json({**event, "seq": seq})
            rows.append((sid, seq, event.get("run_id"), event["type"], event["ts"], body))
        indexed = [e for e in events if e["type"] in INDEX_TYPES]
        try:
            if indexed or len(rows) > MAX_ROWS_PER_INSERT:
                await self._append_in_transaction(rows, indexed)
            else:
                await self._insert_rows(rows)
        except sqlite3.Error as exc:
            self._forget(planned)
            raise DatabaseError(describe("could not write to", self.path, exc)) from exc
        except BaseException:
            self._forget(planned)  # cancelled mid-write: the rows may or may not be there; recount next time
            raise
        for sid, nxt in planned.items():
            self._last_seq[sid] = nxt - 1
        await self._fold_after_run(len(rows), indexed)
        return [row[1] for row in rows]

    async def _next_seq(self, session_id: str) -> int:
        last = self._last_seq.get(session_id)
        if last is None:
            async with self._conn.execute("SELECT MAX(seq) FROM events WHERE session_id=?", (session_id,)) as cur:
                row = await cur.fetchone()
            last = int(row[0]) if row is not None and row[0] is not None else 0
        return last + 1

    def _forget(self, sessions: dict[str, int]) -> None:
        for sid in sessions:
            self._last_seq.pop(sid, None)

    async def _insert_rows(self, rows: list[tuple[Any, ...]]) -> None:
        for sql, params in insert_statements(rows):
            await self._conn.execute(sql, params)

    async def _append_in_transaction(self, rows: list[tuple[Any, ...]], indexed: list[dict[str, Any]]) -> None:
        statements = insert_statements(rows)
        statements += [found for found in map(index_statement, indexed) if found is not None]
        # In one hand-off to aiosqlite's thread, where this connection's every statement runs anyway: its
        # ``_execute`` queues a function there (aiosqlite 0.22, private). Without it, statement by statement.
        in_thread = getattr(self._conn, "_execute", None)
        raw = getattr(self._conn, "_connection", None)
        if callable(in_thread) and isinstance(raw, sqlite3.Connection):
            await in_thread(write_in_transaction, raw, statements)
            return
        db = self._conn
        await db.execute("BEGIN IMMEDIATE")
        try:
            for sql, params in statements:
                await db.execute(sql, params)
            await db.execute("COMMIT")
        except BaseException:
            # On some errors (SQLITE_FULL, SQLITE_IOERR) SQLite has already rolled the transaction back, and
            # ROLLBACK would fail with "no transaction is active", hiding the error that says what to do.
            with anyio.CancelScope(shield=True), contextlib.suppress(sqlite3.Error):
                await db.execute("ROLLBACK")
            raise

    async def _fold_after_run(self, rows: int, indexed: list[dict[str, Any]]) -> None:
        self._unfolded += rows
        if self._unfolded >= _CHECKPOINT_AFTER_ROWS and any(e["type"] == "run_finished" for e in indexed):
            # Between runs is the cheap moment to fold the WAL back; PASSIVE never blocks readers. Not after
            # every run: a checkpoint's cost is mostly fixed (its syncs, about 1.2 ms here), which a one-turn
            # run of a delegating agent paid in full before its answer; after a few hundred rows it is spread
            # over them, and the WAL stays a few MB at most. It is only housekeeping: the batch is committed,
            # so a checkpoint that cannot run now (a read on this connection still open: SQLITE_LOCKED) must not
            # report the append as failed. The next run's end, or SQLite's own threshold, folds the WAL back.
            with contextlib.suppress(sqlite3.OperationalError):
                async with self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)") as cur:
                    row = await cur.fetchone()
                # (busy, frames in the WAL, frames folded back): count again from nothing only if all were.
                if row is not None and row[0] == 0 and row[1] == row[2]:
                    self._unfolded = 0

    async def read_events(
        self,
        session_id: str,
        *,
        after_seq: int = 0,
        run_id: str | None = None,
        limit: int | None = None,
        before_seq: int | None = None,
    ) -> list[str]:
        """The stored JSON of a session's events with ``seq > after_seq``, in order.

        With ``before_seq``, only those with ``seq < before_seq``, and ``limit`` keeps the newest of them (still
        oldest first): a page read backwards from the end.
        """
        sql = "SELECT body FROM events WHERE session_id=? AND seq>?"
        params: list[Any] = [session_id, after_seq]
        if before_seq is not None:
            sql += " AND seq<?"
            params.append(before_seq)
        if run_id is not None:
            sql += " AND run_id=?"
            params.append(run_id)
        # Backwards, the primary key (session_id, seq) is walked from its end, so the page costs its own size.
        sql += " ORDER BY seq DESC" if before_seq is not None else " ORDER BY seq"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        bodies = [row[0] for row in await self._fetch(sql, params)]
        return bodies[::-1] if before_seq is not None else bodies

    async def read_context(self, session_id: str) -> list[str]:
        """The stored JSON of the events the model's context is rebuilt from, in ``seq`` order.

        That is the session's latest ``context_compacted`` event and every event from its
        ``kept_from_seq`` on, or the whole session if it was never compacted. A long session's context
        is a small tail of its log, and this reads only that tail.
        """
        latest = await self._fetch(
            "SELECT body FROM events WHERE session_id=? AND type='context_compacted' ORDER BY seq DESC LIMIT 1",
            (session_id,),
        )
        if not latest:
            return await self.read_events(session_id)
        kept_from = int(json.loads(latest[0][0])["kept_from_seq"])
        return await self.read_events(session_id, after_seq=kept_from - 1)

    async def find_tool_result(self, session_id: str, call_id: str) -> str | None:
        """The stored JSON of the session's latest ``tool_call_finished`` event for ``call_id``, or None.

        The latest, because a resumed run may finish the same call again.
        """
        # Filtered here, not by the client: a long session would otherwise cross the wire whole to find one
        # event. INDEXED BY, because without statistics SQLite prefers the primary key (it covers the query
        # and matches the order), and then parses every tool result of the session; the index holds ``seq``
        # (it ends every index of this table), so it serves the order as well.
        rows = await self._fetch(
            f"SELECT body FROM events INDEXED BY {CALL_INDEX} WHERE session_id=? AND type='tool_call_finished' "
            f"AND {CALL_ID}=? ORDER BY seq DESC LIMIT 1",
            (session_id, call_id),
        )
        return str(rows[0][0]) if rows else None

    # -- sessions and runs ------------------------------------------------------------------------

    async def sessions(self, clause: str, params: Sequence[Any]) -> list[dict[str, Any]]:
        """Session rows (``clause`` follows ``FROM sessions s``) with their last ``seq`` and context gauge."""
        return [session_row(row) for row in await self._fetch(SESSIONS_SELECT + clause, params)]

    async def set_title(self, session_id: str, title: str) -> bool:
        """Give a session its title; False when there is no such session.

        Raises:
            DatabaseError: it could not be written.
        """
        try:
            cur = await self._conn.execute("UPDATE sessions SET title=? WHERE id=?", (title, session_id))
        except sqlite3.Error as exc:
            raise DatabaseError(describe("could not write to", self.path, exc)) from exc
        return cur.rowcount == 1

    async def runs(self, clause: str, params: Sequence[Any]) -> list[dict[str, Any]]:
        """Run rows; ``clause`` follows ``FROM runs``."""
        return [dict(zip(RUN_KEYS, row, strict=True)) for row in await self._fetch(RUNS_SELECT + clause, params)]

    # -- file snapshots ---------------------------------------------------------------------------

    async def snapshot(self, session_id: str, checkpoint: str, path: str, content: bytes | None, ts: float) -> bool:
        """Record a file's content under a checkpoint; False when that checkpoint already has the file.

        The first snapshot wins: a checkpoint keeps the file as it was before anything changed it.
        """
        try:
            cur = await self._conn.execute(
                "INSERT OR IGNORE INTO snapshots VALUES (?,?,?,?,?,?)",
                (session_id, checkpoint, path, int(content is not None), content, ts),
            )
        except sqlite3.Error as exc:
            raise DatabaseError(describe("could not write to", self.path, exc)) from exc
        return cur.rowcount == 1

    async def snapshots(self, session_id: str, checkpoint: str | None) -> list[tuple[str, str, bool, int, float]]:
        """``(checkpoint, path, existed, size, ts)`` of a session's snapshots, oldest first."""
        sql = "SELECT checkpoint, path, existed, COALESCE(length(content), 0), ts FROM snapshots WHERE session_id=?"
        params: list[Any] = [session_id]
        if checkpoint is not None:
            sql += " AND checkpoint=?"
            params.append(checkpoint)
        rows = await self._fetch(sql + " ORDER BY ts, path", params)
        return [(r[0], r[1], bool(r[2]), r[3], r[4]) for r in rows]

    async def snapshot_content(self, session_id: str, checkpoint: str, path: str) -> tuple[bool, bytes | None] | None:
        """``(existed, content)`` of one snapshot, or None when there is none."""
        rows = await self._fetch(
            "SELECT existed, content FROM snapshots WHERE session_id=? AND checkpoint=? AND path=?",
            (session_id, checkpoint, path),
        )
        return (bool(rows[0][0]), rows[0][1]) if rows else None

    async def _fetch(self, sql: str, params: Sequence[Any]) -> list[Any]:
        try:
            async with self._conn.execute(sql, params) as cur:
                return list(await cur.fetchall())
        except sqlite3.Error as exc:
            raise DatabaseError(describe("could not read", self.path, exc)) from exc


def _read_only_uri(path: Path) -> str:
    # mode=ro makes SQLite refuse every write with SQLITE_READONLY, whatever the file's permissions
    return f"{path.resolve().as_uri()}?mode=ro"
