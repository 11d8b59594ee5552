"""The memory server's SQLite database (aiosqlite, WAL mode): schema, migrations, validation and queries.

One table of notes keyed by ``(namespace, scope, key)``. Many memory servers share one file (one
per Loom session), so ``project`` and ``session`` notes carry a scope (the project root, the
session id) and a :class:`Database` is a view of one project and one session: every query it
makes is limited to its own scopes, and ``user`` notes always have scope ``''``. Search is a
case-insensitive substring match (Unicode casefold) done in Python over the candidate rows:
memory stores are small, and this needs neither FTS5 nor its query syntax.
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiosqlite
import anyio

from servers._database import close_shielded, enable_wal, make_private

SCHEMA_VERSION = 2
"""The schema version this code writes; a file with a newer one is refused, an older one migrated."""

NAMESPACES = ("user", "project", "session")
"""The namespaces a note may live in."""

MAX_BODY_BYTES = 64 * 1024
"""The largest body accepted, in UTF-8 bytes."""

MAX_KEY_CHARS = 64
_KEY = re.compile(r"^[a-z0-9][a-z0-9._-]*$")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS notes (
    namespace TEXT NOT NULL, key TEXT NOT NULL, body TEXT NOT NULL,
    created REAL NOT NULL, updated REAL NOT NULL,
    PRIMARY KEY (namespace, key)
);
"""
"""Version 1 of the schema; a new file starts here and the migrations build the rest, so that new and
migrated databases cannot differ."""

_MIGRATIONS: dict[int, tuple[str, ...]] = {
    # Scopes. SQLite cannot change a primary key in place, so the table is rebuilt; existing notes
    # get scope '' (what a server started without --project/--session reads).
    2: (
        """CREATE TABLE notes_v2 (
            namespace TEXT NOT NULL, scope TEXT NOT NULL DEFAULT '', key TEXT NOT NULL, body TEXT NOT NULL,
            created REAL NOT NULL, updated REAL NOT NULL,
            PRIMARY KEY (namespace, scope, key)
        )""",
        "INSERT INTO notes_v2 (namespace, scope, key, body, created, updated) "
        "SELECT namespace, '', key, body, created, updated FROM notes",
        "DROP TABLE notes",
        "ALTER TABLE notes_v2 RENAME TO notes",
    ),
}
"""The statements that take a file from the version before each key to that version, run in one transaction."""

_COLUMNS = "namespace, key, body, created, updated"


class DatabaseError(Exception):
    """The database could not be opened, read or written; the message says why."""


class NoteError(ValueError):
    """A request the store refuses: unknown namespace, bad key or body, missing note."""


@dataclass(frozen=True)
class Note:
    """One stored note."""

    namespace: str
    key: str
    body: str
    created: float
    updated: float


def check_namespace(namespace: str) -> str:
    """Return ``namespace`` if it is known, else raise :class:`NoteError`."""
    if namespace not in NAMESPACES:
        raise NoteError(f"unknown namespace {namespace!r}; use one of {', '.join(NAMESPACES)}")
    return namespace


def check_key(key: str) -> str:
    """Return ``key`` if it is a short slug (lowercase letters, digits, ``.``, ``_``, ``-``), else raise."""
    if not key:
        raise NoteError("the key is empty; give a short slug such as 'build-commands'")
    if len(key) > MAX_KEY_CHARS:
        raise NoteError(f"the key is {len(key)} characters long; the limit is {MAX_KEY_CHARS}")
    if not _KEY.match(key):
        raise NoteError(
            f"the key {key!r} is not a slug: use lowercase letters, digits, '.', '_' and '-', "
            "starting with a letter or digit"
        )
    return key


def check_body(body: str) -> str:
    """Return ``body`` if it is non-blank and at most :data:`MAX_BODY_BYTES`, else raise."""
    if not body.strip():
        raise NoteError("the body is empty; to remove a note use delete")
    size = len(body.encode("utf-8"))
    if size > MAX_BODY_BYTES:
        raise NoteError(f"the body is {size} bytes; the limit is {MAX_BODY_BYTES} bytes (64 KiB)")
    return body


def summary(body: str, limit: int = 120) -> str:
    """The first non-blank line of ``body``, cut to ``limit`` characters."""
    for line in body.splitlines():
        line = line.strip()
        if line:
            return line if len(line) <= limit else line[: limit - 1] + "…"
    return ""


def snippet(body: str, query: str, width: int = 60) -> str:
    """The text around the first case-insensitive occurrence of ``query`` in ``body``, on one line."""
    folded = body.casefold()
    at = folded.find(query.casefold())
    if at < 0 or len(folded) != len(body):  # casefold changed the length: positions do not map back
        at = max(body.lower().find(query.lower()), 0)
    start, end = max(at - width, 0), min(at + len(query) + width, len(body))
    text = " ".join(body[start:end].split())
    return ("…" if start > 0 else "") + text + ("…" if end < len(body) else "")


@dataclass(frozen=True)
class Archive:
    """What promoting a session's notes to the project did (see :meth:`Database.archive`)."""

    promoted: list[str]
    """Keys the project now has from the session, as stored there (a renamed note under its new key)."""
    renamed: dict[str, str]
    """Session key -> project key, for notes kept beside a different project note of the same key."""
    unchanged: list[str]
    """Session keys whose note the project already has word for word (promoted before)."""
    skipped: list[str]
    """``key: why`` for notes that could not be promoted (the key shown escaped when it is not text)."""


class Database:
    """One SQLite file of notes, seen from one project and one session.

    Open with :meth:`open`, close with :meth:`close`. ``project`` and ``session`` notes are read and
    written under the scopes given to :meth:`open`; other scopes in the same file stay invisible.
    """

    def __init__(self, path: Path, conn: aiosqlite.Connection, scopes: Mapping[str, str]) -> None:
        self.path = path
        self._conn = conn
        self._scopes = dict(scopes)

    @classmethod
    async def open(cls, path: Path, *, project: str = "", session: str = "") -> Database:
        """Open (creating it and its directory, and migrating it, if needed) the database at ``path``.

        Args:
            path: the SQLite file.
            project: the scope of ``project`` notes, e.g. the project's root path; ``''`` for the unscoped namespace.
            session: the scope of ``session`` notes, e.g. the session id; ``''`` for the unscoped namespace.

        Raises:
            DatabaseError: the file cannot be opened or migrated, or a newer schema wrote it.
        """
        conn: aiosqlite.Connection | None = None
        try:
            make_private(path)
            conn = await aiosqlite.connect(path, isolation_level=None)
            await conn.execute("PRAGMA busy_timeout=5000")
            await enable_wal(conn)
            await conn.execute("PRAGMA synchronous=NORMAL")
            # One transaction, because several memory servers may open a new file at once; an existing
            # file keeps its version (OR IGNORE).
            await conn.executescript(
                f"BEGIN IMMEDIATE; {_SCHEMA} INSERT OR IGNORE INTO meta VALUES ('schema_version', '1'); COMMIT;"
            )
            await _migrate(conn, path)
        except (sqlite3.Error, OSError) as exc:
            await close_shielded(conn)
            raise DatabaseError(f"cannot open the memory database at {path}: {exc}") from exc
        except BaseException:
            await close_shielded(conn)
            raise
        return cls(path, conn, {"user": "", "project": project, "session": session})

    async def close(self) -> None:
        """Close the connection."""
        await close_shielded(self._conn)

    def scope(self, namespace: str) -> str:
        """The scope this view reads and writes ``namespace`` under; raises :class:`NoteError` if unknown."""
        return self._scopes[check_namespace(namespace)]

    async def set(self, namespace: str, key: str, body: str) -> tuple[Note, bool]:
        """Create or replace a note; returns it and whether it was created (False: updated)."""
        scope = self.scope(namespace)
        check_key(key)
        check_body(body)
        now = time.time()
        existing = await self.get(namespace, key)
        if existing is None:
            await self._write(
                f"INSERT INTO notes (scope, {_COLUMNS}) VALUES (?,?,?,?,?,?)", (scope, namespace, key, body, now, now)
            )
            return Note(namespace, key, body, now, now), True
        updated = max(now, existing.updated)
        await self._write(
            "UPDATE notes SET body=?, updated=? WHERE namespace=? AND scope=? AND key=?",
            (body, updated, namespace, scope, key),
        )
        return Note(namespace, key, body, existing.created, updated), False

    async def get(self, namespace: str, key: str) -> Note | None:
        """The note, or None when there is none."""
        scope = self.scope(namespace)
        rows = await self._fetch(
            f"SELECT {_COLUMNS} FROM notes WHERE namespace=? AND scope=? AND key=?", (namespace, scope, key)
        )
        return Note(*rows[0]) if rows else None

    async def notes(self, namespace: str) -> list[Note]:
        """The notes of a namespace, sorted by key."""
        scope = self.scope(namespace)
        rows = await self._fetch(
            f"SELECT {_COLUMNS} FROM notes WHERE namespace=? AND scope=? ORDER BY key", (namespace, scope)
        )
        return [Note(*row) for row in rows]

    async def search(self, query: str, namespace: str | None) -> list[Note]:
        """Notes whose key or body contains ``query`` (case-insensitive), by namespace then key.

        ``namespace`` None searches every namespace, each under this view's scope.
        """
        if not query.strip():
            raise NoteError("the search query is empty")
        namespaces = NAMESPACES if namespace is None else (check_namespace(namespace),)
        where = " OR ".join("(namespace=? AND scope=?)" for _ in namespaces)
        params = [value for ns in namespaces for value in (ns, self._scopes[ns])]
        rows = await self._fetch(f"SELECT {_COLUMNS} FROM notes WHERE {where} ORDER BY namespace, key", params)
        needle = query.casefold()
        return [Note(*r) for r in rows if needle in r[2].casefold() or needle in r[1].casefold()]

    async def delete(self, namespace: str, key: str) -> bool:
        """Remove a note; False when there was none."""
        scope = self.scope(namespace)
        deleted = await self._write(
            "DELETE FROM notes WHERE namespace=? AND scope=? AND key=?", (namespace, scope, key)
        )
        return deleted == 1

    async def archive(self) -> Archive:
        """Promote this view's session notes to its project: copies, so the session keeps its own.

        Only this view's session scope is read (another session's notes are never seen) and no project note is
        overwritten: a project note of the same key with another body is kept, and the session's note goes beside
        it under ``<key>.<session>`` (then ``-2``, ``-3``...). Run again, nothing is promoted twice. A row whose key
        or body is not UTF-8 text, or whose key is not a slug (written by other code), is skipped and named.
        All in one transaction, so servers promoting at once cannot interleave.

        Raises:
            NoteError: this view has no session scope (a server started without ``--session``).
            DatabaseError: the database could not be read or written.
        """
        session = self._scopes["session"]
        if not session:
            raise NoteError(
                "this memory server has no session scope (--session), so it has no session notes to archive"
            )
        project = self._scopes["project"]
        promoted: list[str] = []
        renamed: dict[str, str] = {}
        unchanged: list[str] = []
        skipped: list[str] = []
        try:
            await self._conn.execute("BEGIN IMMEDIATE")
            try:
                # As bytes: a key or body that is not UTF-8 would otherwise fail the whole read.
                rows = await self._rows(
                    "SELECT CAST(key AS BLOB), CAST(body AS BLOB), created FROM notes WHERE namespace='session' "
                    "AND scope=? ORDER BY key",
                    (session,),
                )
                for raw_key, raw_body, created in rows:
                    key, body, why = _readable(raw_key, raw_body)
                    if why:
                        skipped.append(f"{key}: {why}")
                        continue
                    target = await self._free_key(project, key, body, session)
                    if target is None:
                        unchanged.append(key)
                        continue
                    await self._conn.execute(
                        f"INSERT INTO notes (scope, {_COLUMNS}) VALUES (?,?,?,?,?,?)",
                        (project, "project", target, body, created, max(time.time(), created)),
                    )
                    promoted.append(target)
                    if target != key:
                        renamed[key] = target
                await self._conn.execute("COMMIT")
            except BaseException:
                with anyio.CancelScope(shield=True):
                    if self._conn.in_transaction:
                        await self._conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise DatabaseError(
                f"could not archive session notes in the memory database at {self.path}: {exc}"
            ) from exc
        return Archive(promoted, renamed, unchanged, skipped)

    async def _free_key(self, project: str, key: str, body: str, session: str) -> str | None:
        """The project key the session's note goes under: its own if free, else ``<key>.<session>``, ``-2``...

        None: the project has this very note (same body) under its own key or one of the candidates already.
        """
        suffix = re.sub(r"[^a-z0-9]+", "", session.lower())[-12:] or "session"
        candidates = [key]
        base = f"{key[: MAX_KEY_CHARS - len(suffix) - 4]}.{suffix}"
        candidates += [base, *(f"{base}-{n}" for n in range(2, 100))]
        for candidate in candidates:
            existing = await self._project_body(project, candidate)
            if existing == body:
                return None
            if existing is None:
                return candidate
        raise NoteError(f"no free key in the project for the session's note {key!r}")

    async def _project_body(self, project: str, key: str) -> str | None:
        rows = await self._rows(
            "SELECT CAST(body AS BLOB) FROM notes WHERE namespace='project' AND scope=? AND key=?", (project, key)
        )
        if not rows:
            return None
        return bytes(rows[0][0]).decode("utf-8", errors="replace")

    async def _rows(self, sql: str, params: Sequence[Any]) -> list[Any]:
        async with self._conn.execute(sql, params) as cur:
            return list(await cur.fetchall())

    async def _write(self, sql: str, params: Sequence[Any]) -> int:
        try:
            cur = await self._conn.execute(sql, params)
        except sqlite3.Error as exc:
            raise DatabaseError(f"could not write to the memory database at {self.path}: {exc}") from exc
        return cur.rowcount

    async def _fetch(self, sql: str, params: Sequence[Any]) -> list[Any]:
        try:
            async with self._conn.execute(sql, params) as cur:
                return list(await cur.fetchall())
        except sqlite3.Error as exc:
            raise DatabaseError(f"could not read the memory database at {self.path}: {exc}") from exc


def _readable(raw_key: Any, raw_body: Any) -> tuple[str, str, str]:
    """A stored row's key and body as text, and why it cannot be promoted ('' when it can)."""
    key_bytes = bytes(raw_key) if raw_key is not None else b""
    try:
        key = key_bytes.decode("utf-8")
    except UnicodeDecodeError:
        return repr(key_bytes)[:80], "", "the key is not UTF-8 text"
    try:
        body = (bytes(raw_body) if raw_body is not None else b"").decode("utf-8")
    except UnicodeDecodeError:
        return key[:80], "", "the body is not UTF-8 text"
    try:
        check_key(key)
        check_body(body)
    except NoteError as exc:
        return repr(key)[:80], "", str(exc)
    return key, body, ""


async def _schema_version(conn: aiosqlite.Connection) -> int:
    async with conn.execute("SELECT value FROM meta WHERE key='schema_version'") as cur:
        row = await cur.fetchone()
    return int(row[0]) if row is not None else 0


async def _migrate(conn: aiosqlite.Connection, path: Path) -> None:
    """Bring the file up to :data:`SCHEMA_VERSION`, one transaction per version; refuse a newer file."""
    found = await _schema_version(conn)
    if found > SCHEMA_VERSION:
        raise DatabaseError(
            f"the memory database at {path} has schema {found}, newer than this server knows "
            f"({SCHEMA_VERSION}); upgrade Loom or point --db elsewhere"
        )
    for version in range(found + 1, SCHEMA_VERSION + 1):
        await conn.execute("BEGIN IMMEDIATE")
        try:
            # Another server on the same file may have migrated it since we read the version.
            if await _schema_version(conn) < version:
                for statement in _MIGRATIONS[version]:
                    await conn.execute(statement)
                await conn.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(version),))
            await conn.execute("COMMIT")
        except BaseException:
            with anyio.CancelScope(shield=True):
                if conn.in_transaction:
                    await conn.execute("ROLLBACK")
            raise
