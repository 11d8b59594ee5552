"""The checkpoint server's Postgres database: the SQLite `Database`'s methods, results and errors, over psycopg 3.

Several processes share one Postgres store (a face and its workers), so what the SQLite backend may keep in a
process, this one keeps in the database: an append numbers its events under the row lock of each session's
``seqs`` row, in the append's own transaction, and sends ``NOTIFY loom_events, '<session_id>:<last_seq>'`` for
each session it wrote (delivered on commit), so other processes learn of new events without polling. The index
statements are SQLite's (:func:`~servers.checkpoints._writes.index_statement`), with ``?`` placeholders written
as psycopg's ``%s``; so are the session and run listings (:mod:`servers.checkpoints._schema`), and the clauses
the server's tools pass to :meth:`PostgresDatabase.sessions` and :meth:`PostgresDatabase.runs`.

The tables live in schema ``loom`` (:mod:`servers.checkpoints._pg_schema`), beside DBOS's ``dbos``. One
connection per database object, used by one operation at a time (an :class:`anyio.Lock`); each operation runs
shielded from cancellation under a deadline, so a cancelled caller never leaves the connection mid-statement,
and a connection that broke is opened again by the next operation.
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from typing import Any

import anyio
import psycopg

from servers.checkpoints._errors import DatabaseError
from servers.checkpoints._pg_errors import describe_pg, mask_url
from servers.checkpoints._pg_schema import PG_BASE_VERSION, PG_MIGRATIONS, PG_SCHEMA, SCHEMA_NAME, open_lock_key
from servers.checkpoints._schema import RUN_KEYS, RUNS_SELECT, SCHEMA_VERSION, SESSIONS_SELECT, session_row
from servers.checkpoints._writes import INDEX_TYPES, event_json, index_statement, session_of

__all__ = ["EVENTS_CHANNEL", "PostgresDatabase", "pyformat"]

EVENTS_CHANNEL = "loom_events"
"""The channel every append notifies, once per session written, with ``<session_id>:<last_seq>``."""

OPERATION_TIMEOUT_S = 30.0
"""The longest one operation (an append, a read) may take before it fails and the connection is opened anew."""

CONNECT_TIMEOUT_S = 10
_ROWS_PER_INSERT = 500
"""Postgres binds at most 65,535 parameters per statement; 8 per row keeps far below."""

Conn = psycopg.AsyncConnection[tuple[Any, ...]]

# An event's seq is its session's last seq after this append (the counter row, updated and locked earlier in the
# same transaction) less the session's count in the batch plus its position there (k of n).
_ROW = "(%s::text,%s::bigint,%s::bigint,%s::text,%s::text,%s::float8,%s::text,%s::text)"
_INSERT_EVENTS = (
    "INSERT INTO events (session_id, seq, run_id, type, ts, body, call_id) "
    "SELECT v.sid, s.last_seq - v.n + v.k, v.run_id, v.type, v.ts, v.head || (s.last_seq - v.n + v.k) || '}', "
    "v.call_id FROM (VALUES <values>) AS v(sid, k, n, run_id, type, ts, head, call_id) "
    "JOIN seqs s ON s.session_id = v.sid"
)
_NOTIFY = "SELECT pg_notify(%s, session_id || ':' || last_seq) FROM seqs WHERE session_id = ANY(%s) ORDER BY session_id"


def pyformat(sql: str) -> str:
    """SQL written with SQLite's ``?`` placeholders, for psycopg (``%s``; a literal ``%`` doubled)."""
    return sql.replace("%", "%%").replace("?", "%s")


class PostgresDatabase:
    """A Loom store in a Postgres database, shared by any number of processes. Open with :meth:`open`."""

    def __init__(self, url: str, conn: Conn, *, read_only: bool) -> None:
        self._url = url  # holds the password: never shown, see `path`
        self.path = mask_url(url)
        """The database's URL with its password masked: what messages and ``status`` show."""
        self.read_only = read_only
        self._conn: Conn | None = conn
        self._lock = anyio.Lock()

    @classmethod
    async def open(cls, url: str, *, read_only: bool = False) -> PostgresDatabase:
        """Connect to the database at ``url``, creating or migrating Loom's tables there unless ``read_only``.

        Raises:
            DatabaseError: the server cannot be reached or refused the connection, the URL is not valid, or a
                newer Loom wrote the store; the message says what to do and never shows the password.
        """
        with anyio.CancelScope(shield=True):
            conn = await _connect_described(url, read_only=read_only, action="cannot open")
            db = cls(url, conn, read_only=read_only)
            try:
                with anyio.fail_after(OPERATION_TIMEOUT_S):
                    await db._configure(conn)
            except (psycopg.Error, TimeoutError) as exc:
                await conn.close()
                raise DatabaseError(describe_pg("cannot open", url, exc)) from exc
            except BaseException:
                await conn.close()
                raise
        return db

    async def close(self) -> None:
        """Close the connection."""
        with anyio.CancelScope(shield=True):
            conn, self._conn = self._conn, None
            if conn is not None:
                await conn.close()

    async def _configure(self, conn: Conn) -> None:
        found = await self._version(conn)
        if found == SCHEMA_VERSION:
            return  # the common case: no DDL, which a user without CREATE on the database could not run
        if found > SCHEMA_VERSION:
            raise DatabaseError(
                f"the Loom database at {self.path} was written by a newer Loom (schema {found}, this Loom "
                f"knows up to {SCHEMA_VERSION}); upgrade Loom, or use another database"
            )
        if self.read_only:
            raise DatabaseError(
                f"the Loom database at {self.path} has schema {found} and is opened read-only; "
                f"open it once read-write to {'create' if found == 0 else 'migrate'} it"
            )
        # Several processes may open a new store at once: one creates it, the others find it made. The lock is
        # taken before the transaction begins, not inside it: a transaction that began before the winner committed
        # may still see the catalog without its tables, create them again and deadlock with a process appending.
        await conn.execute("SELECT pg_advisory_lock(%s)", (open_lock_key(),))
        try:
            async with conn.transaction():
                if await self._version(conn) == 0:
                    await conn.execute(PG_SCHEMA)
                for version in range(max(await self._version(conn), PG_BASE_VERSION) + 1, SCHEMA_VERSION + 1):
                    for statement in PG_MIGRATIONS[version]:
                        await conn.execute(statement)
                    await conn.execute("UPDATE meta SET value=%s WHERE key='schema_version'", (str(version),))
        finally:
            if not conn.broken:
                await conn.execute("SELECT pg_advisory_unlock(%s)", (open_lock_key(),))

    @staticmethod
    async def _version(conn: Conn) -> int:
        cur = await conn.execute("SELECT to_regclass(%s)", (f"{SCHEMA_NAME}.meta",))
        exists = await cur.fetchone()
        if exists is None or exists[0] is None:
            return 0
        cur = await conn.execute("SELECT value FROM meta WHERE key='schema_version'")
        row = await cur.fetchone()
        return int(row[0]) if row is not None else 0

    async def schema_version(self) -> int:
        """The version recorded in the store (0 for a database without Loom's tables)."""
        async with self._using("could not read") as conn:
            return await self._version(conn)

    @asynccontextmanager
    async def _using(self, action: str) -> AsyncIterator[Conn]:
        """The connection, to this operation alone, shielded under a deadline; failures as `DatabaseError`."""
        async with self._lock:
            with anyio.CancelScope(shield=True):
                conn = self._conn
                if conn is None or conn.closed or conn.broken:
                    conn = self._conn = await _connect_described(self._url, read_only=self.read_only, action=action)
                try:
                    with anyio.fail_after(OPERATION_TIMEOUT_S):
                        yield conn
                except psycopg.Error as exc:
                    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                        await self._drop(conn)  # left mid-transaction or broken: the next operation reconnects
                    raise DatabaseError(describe_pg(action, self._url, exc)) from exc
                except UnicodeEncodeError as exc:  # a lone surrogate in a parameter: refused before it was sent
                    raise DatabaseError(describe_pg(action, self._url, exc)) from exc
                except TimeoutError as exc:
                    await self._drop(conn)
                    raise DatabaseError(
                        f"{action} the Loom database at {self.path}: no answer within {OPERATION_TIMEOUT_S:.0f} s "
                        "(is the Postgres server overloaded or unreachable? Check it and try again)"
                    ) from exc

    async def _drop(self, conn: Conn) -> None:
        if self._conn is conn:
            self._conn = None
        await conn.close()

    # -- events -----------------------------------------------------------------------------------

    async def append(self, events: Sequence[dict[str, Any]]) -> list[int]:
        """Number ``events`` per session, store them atomically and return their ``seq`` values.

        Raises:
            DatabaseError: nothing of the batch was stored (the message says why).
            ValueError: an event lacks ``session_id``, ``type`` or ``ts``.
        """
        if not events:
            return []
        sids = [session_of(event) for event in events]
        counts = Counter(sids)
        # Sorted: two appends that lock the same sessions lock them in the same order, so they cannot deadlock.
        order = sorted(counts)
        rows: list[tuple[Any, ...]] = []
        position: Counter[str] = Counter()
        for event, sid in zip(events, sids, strict=True):
            position[sid] += 1
            call_id = event.get("call_id") if event["type"] == "tool_call_finished" else None
            # The body as SQLite stores it ({**event, "seq": seq}) but for the number, which the database appends:
            # the whole append is then sent at once, without waiting to learn the seqs first.
            body = event_json({key: value for key, value in event.items() if key != "seq"})
            head = body[:-1] + ',"seq":'
            run_id, kind, ts = event.get("run_id"), event["type"], event["ts"]
            rows.append((sid, position[sid], counts[sid], run_id, kind, ts, head, _text(call_id)))
        indexed = [_clean_statement(found) for e in events if e["type"] in INDEX_TYPES if (found := index_statement(e))]
        async with self._using("could not write to") as conn:
            # BEGIN and COMMIT as statements of the pipeline: psycopg's transaction() would wait for its BEGIN.
            try:
                async with _pipelined(conn):
                    await conn.execute("BEGIN")
                    numbered = await conn.execute(
                        "INSERT INTO seqs (session_id, last_seq) VALUES "
                        + ",".join(["(%s,%s)"] * len(order))
                        + " ON CONFLICT (session_id) DO UPDATE SET last_seq = seqs.last_seq + excluded.last_seq"
                        " RETURNING session_id, last_seq",
                        [value for sid in order for value in (sid, counts[sid])],
                    )
                    for start in range(0, len(rows), _ROWS_PER_INSERT):
                        chunk = rows[start : start + _ROWS_PER_INSERT]
                        values = ",".join([_ROW] * len(chunk))
                        await conn.execute(_INSERT_EVENTS.replace("<values>", values), _flat(chunk))
                    for sql, params in indexed:
                        await conn.execute(sql, params)
                    await conn.execute(_NOTIFY, (EVENTS_CHANNEL, order))
                    await conn.execute("COMMIT")
            except psycopg.Error:
                await _roll_back(conn)
                raise
            last = {str(sid): int(seq) for sid, seq in await numbered.fetchall()}
        return [last[row[0]] - row[2] + row[1] for row in rows]

    async def read_events(
        self,
        session_id: str,
        *,
        after_seq: int = 0,
        run_id: str | None = None,
        limit: int | None = None,
        before_seq: int | None = None,
    ) -> list[str]:
        """The stored JSON of a session's events with ``seq > after_seq``, in order (see `Database.read_events`)."""
        sql = "SELECT body FROM events WHERE session_id=%s AND seq>%s"
        params: list[Any] = [session_id, after_seq]
        if before_seq is not None:
            sql += " AND seq<%s"
            params.append(before_seq)
        if run_id is not None:
            sql += " AND run_id=%s"
            params.append(run_id)
        sql += " ORDER BY seq DESC" if before_seq is not None else " ORDER BY seq"
        if limit is not None:
            sql += " LIMIT %s"
            params.append(limit)
        bodies = [str(row[0]) for row in await self._fetch(sql, params)]
        return bodies[::-1] if before_seq is not None else bodies

    async def read_context(self, session_id: str) -> list[str]:
        """The stored JSON of the events the model's context is rebuilt from (see `Database.read_context`)."""
        latest = await self._fetch(
            "SELECT body FROM events WHERE session_id=%s AND type='context_compacted' ORDER BY seq DESC LIMIT 1",
            (session_id,),
        )
        if not latest:
            return await self.read_events(session_id)
        kept_from = int(json.loads(latest[0][0])["kept_from_seq"])
        return await self.read_events(session_id, after_seq=kept_from - 1)

    async def find_tool_result(self, session_id: str, call_id: str) -> str | None:
        """The stored JSON of the session's latest ``tool_call_finished`` event for ``call_id``, or None."""
        rows = await self._fetch(
            "SELECT body FROM events WHERE session_id=%s AND call_id=%s ORDER BY seq DESC LIMIT 1",
            (session_id, _text(call_id)),  # cleaned as the append cleaned it
        )
        return str(rows[0][0]) if rows else None

    # -- sessions and runs ------------------------------------------------------------------------

    async def sessions(self, clause: str, params: Sequence[Any]) -> list[dict[str, Any]]:
        """Session rows (``clause``, with ``?`` placeholders, follows ``FROM sessions s``); see `Database.sessions`."""
        return [session_row(row) for row in await self._fetch(pyformat(SESSIONS_SELECT + clause), params)]

    async def set_title(self, session_id: str, title: str) -> bool:
        """Give a session its title; False when there is no such session.

        Raises:
            DatabaseError: it could not be written.
        """
        async with self._using("could not write to") as conn:
            cur = await conn.execute("UPDATE sessions SET title=%s WHERE id=%s", (_text(title), session_id))
            return cur.rowcount == 1

    async def runs(self, clause: str, params: Sequence[Any]) -> list[dict[str, Any]]:
        """Run rows; ``clause`` (with ``?`` placeholders) follows ``FROM runs``."""
        rows = await self._fetch(pyformat(RUNS_SELECT + clause), params)
        return [dict(zip(RUN_KEYS, row, strict=True)) for row in rows]

    # -- file snapshots ---------------------------------------------------------------------------

    async def snapshot(self, session_id: str, checkpoint: str, path: str, content: bytes | None, ts: float) -> bool:
        """Record a file's content under a checkpoint; False when that checkpoint already has the file."""
        async with self._using("could not write to") as conn:
            cur = await conn.execute(
                "INSERT INTO snapshots VALUES (%s,%s,%s,%s,%s,%s) ON CONFLICT DO NOTHING",
                (session_id, checkpoint, path, int(content is not None), content, ts),
            )
            return cur.rowcount == 1

    async def snapshots(self, session_id: str, checkpoint: str | None) -> list[tuple[str, str, bool, int, float]]:
        """``(checkpoint, path, existed, size, ts)`` of a session's snapshots, oldest first."""
        sql = "SELECT checkpoint, path, existed, COALESCE(length(content), 0), ts FROM snapshots WHERE session_id=%s"
        params: list[Any] = [session_id]
        if checkpoint is not None:
            sql += " AND checkpoint=%s"
            params.append(checkpoint)
        rows = await self._fetch(sql + " ORDER BY ts, path", params)
        return [(r[0], r[1], bool(r[2]), r[3], r[4]) for r in rows]

    async def snapshot_content(self, session_id: str, checkpoint: str, path: str) -> tuple[bool, bytes | None] | None:
        """``(existed, content)`` of one snapshot, or None when there is none."""
        rows = await self._fetch(
            "SELECT existed, content FROM snapshots WHERE session_id=%s AND checkpoint=%s AND path=%s",
            (session_id, checkpoint, path),
        )
        if not rows:
            return None
        content = rows[0][1]
        return bool(rows[0][0]), None if content is None else bytes(content)

    async def _fetch(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        async with self._using("could not read") as conn:
            cur = await conn.execute(sql, params)
            return await cur.fetchall()


async def _connect_described(url: str, *, read_only: bool, action: str) -> Conn:
    try:
        conn = await psycopg.AsyncConnection.connect(
            url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S, application_name="loom"
        )
    except (psycopg.Error, ValueError, OSError) as exc:
        raise DatabaseError(describe_pg(action, url, exc)) from exc
    try:
        settings = f"SET search_path TO {SCHEMA_NAME}"
        if read_only:  # Postgres itself refuses every write then (SQLSTATE 25006), as mode=ro does for SQLite
            settings += "; SET default_transaction_read_only TO on"
        await conn.execute(settings)
    except psycopg.Error as exc:
        await conn.close()
        raise DatabaseError(describe_pg(action, url, exc)) from exc
    return conn


def _pipelined(conn: Conn) -> AbstractAsyncContextManager[Any]:
    """Send the statements inside without waiting for each answer (one round trip), where libpq can."""
    return conn.pipeline() if psycopg.Pipeline.is_supported() else nullcontext()


async def _roll_back(conn: Conn) -> None:
    """End a failed append's transaction; if even that fails, the connection is dropped (see `_using`)."""
    if conn.info.transaction_status in (psycopg.pq.TransactionStatus.INTRANS, psycopg.pq.TransactionStatus.INERROR):
        with contextlib.suppress(psycopg.Error):
            await conn.execute("ROLLBACK")


def _flat(rows: Sequence[tuple[Any, ...]]) -> list[Any]:
    return [value for row in rows for value in row]


def _text(value: Any) -> Any:
    """A string Postgres can hold as text: without NUL characters or lone surrogates, which SQLite keeps.

    Only the index's columns go through here (a title, a final text, a cwd); an event's body keeps every character,
    as JSON escapes.
    """
    if not isinstance(value, str) or value.isascii() and "\x00" not in value:
        return value
    return value.replace("\x00", "\ufffd").encode("utf-8", "replace").decode("utf-8")


def _clean_statement(statement: tuple[str, Sequence[Any]]) -> tuple[str, list[Any]]:
    sql, params = statement
    return pyformat(sql), [_text(value) for value in params]
