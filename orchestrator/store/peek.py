"""A read-only look at Loom's database for the listing commands (``loom runs``, ``trace``, ``export``).

Loom's store is the checkpoints MCP server, and reading it the usual way means importing the MCP SDK
(0.6 s) and starting the server in-process: 1.4 s for ``loom runs``, against 0.04 s for ``loom --help``.
A listing only reads, so it
reads the SQLite file itself, opened with ``mode=ro`` (SQLite then refuses every write, and a missing
file is never created), with the standard library alone. The server still owns the schema: this module
answers only for the schema versions it knows, and raises :class:`Unreadable` for anything else, so that
the caller asks the server instead (which migrates an old file, or says a newer Loom wrote it).

The reads mirror the server's ``list_runs``, ``get_run``, ``find_run`` and ``read_events``. :func:`list_runs` and
:func:`run_events` ask the server themselves when the file is :class:`Unreadable`.

This is the one part of the store a client imports (``loom runs``, ``trace`` and ``export`` in
:mod:`clients.cli`): everything else a client does goes through the face.

On the dbos engine (``"engine": {"kind": "dbos", ...}`` in ``$LOOM_HOME/config.json``) the store is the shared
Postgres database, not a file: the reads raise :class:`OnServer` (an :class:`Unreadable`), and :func:`list_runs`
and :func:`run_events` read that database through the checkpoints server, adding who holds each run now from
DBOS's own record (:mod:`orchestrator.store.peek_server`).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from orchestrator.home import DB_NAME
from orchestrator.runtime.owner import WORKER_OWNER, owner_alive
from orchestrator.store.session_view import clean_title, session_status

__all__ = [
    "DB_NAME",
    "KNOWN_SCHEMAS",
    "OnServer",
    "ReadFailed",
    "RunRow",
    "Unreadable",
    "SessionRow",
    "engine_database",
    "find_run",
    "list_runs",
    "recent_sessions",
    "recent_runs",
    "run_events",
    "session_events",
    "shown_store",
    "store_location",
]


KNOWN_SCHEMAS = range(3, 8)
"""Schema versions whose ``runs`` and ``events`` tables these reads match; a test keeps the top equal to the
server's ``SCHEMA_VERSION``, so that a schema change cannot pass by this module unnoticed."""

_RUN_COLUMNS = "id, session_id, started, finished, status, reason, model, owner"
_STILL_GOING = frozenset({"running", "queued"})


class Unreadable(Exception):
    """The file is not one this module can read (unknown schema, locked, damaged); ask the server instead."""


class OnServer(Unreadable):
    """The store is the dbos engine's Postgres database, which only the checkpoints server reads."""


class ReadFailed(Exception):
    """The store could not be read at all; the message says why (and what to do)."""


def engine_database(home: Path) -> str | None:
    """The dbos engine's database URL (``${VAR}`` expanded) when ``home``'s config chooses it, else None.

    Only ``$LOOM_HOME/config.json`` can choose the engine (a project's config cannot), so only that file is read;
    a file that does not mention ``"engine"`` costs one read and no import, which keeps ``loom runs`` fast.

    Raises:
        ReadFailed: the file names an engine that cannot be used (the message names the file and the key).
    """
    path = home / "config.json"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None  # a missing file is the embedded default; an unreadable one, `loom run` reports itself
    if '"engine"' not in text:
        return None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ReadFailed(f"{path}: not valid JSON ({exc}); fix it, since its engine says where the runs are") from exc
    if not isinstance(data, dict) or "engine" not in data:
        return None
    from orchestrator.engine.settings import EngineSettingsError, parse_engine

    try:
        settings = parse_engine(data["engine"], f"{path}: engine")
    except EngineSettingsError as exc:
        raise ReadFailed(str(exc)) from exc
    return settings.database if settings.distributed else None


def store_location(home: Path) -> Path | str:
    """Where ``home``'s runs are stored: the dbos engine's database URL, else the SQLite file under ``home``.

    Raises:
        ReadFailed: as :func:`engine_database`.
    """
    return engine_database(home) or home / DB_NAME


def shown_store(home: Path) -> str:
    """Where ``home``'s runs are, fit to print: the home, or the dbos engine's database with its password masked."""
    try:
        database = engine_database(home)
    except ReadFailed:
        return str(home)
    if database is None:
        return str(home)
    from orchestrator.engine.settings import mask_url

    return mask_url(database)


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
    held_by: str | None = None
    """Who holds it by DBOS's record (:func:`live_holders`): a worker id, ``""`` while queued, None when unknown."""

    @property
    def worker(self) -> str | None:
        """The worker that holds the run (or held it last) on the dbos engine, ``""`` while none has; else None."""
        if self.held_by is not None:
            return self.held_by
        if self.owner.startswith(WORKER_OWNER):
            return self.owner[len(WORKER_OWNER) :]
        return None

    @property
    def shown_owner(self) -> str:
        """``loom runs``' OWNER cell: ``worker ID``, ``queued`` while no worker has taken it, else ``-``."""
        worker = self.worker
        if worker:
            return f"worker {worker}"
        return "queued" if worker == "" and self.status in _STILL_GOING else "-"

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


class SessionRow(NamedTuple):
    """One session as ``list_sessions`` shows it (the face's ``SessionInfo`` fields)."""

    session_id: str
    cwd: str
    model: str
    mode: str
    archived: bool
    last_seq: int
    state: str
    """``archived``, ``active`` (a run of it goes on in a live process) or ``idle``."""
    context_used: int | None
    context_window: int | None
    status: str = "idle"
    """What the session needs (see :func:`orchestrator.store.session_view.session_status`)."""
    title: str = ""
    """Its title, cleaned for a terminal."""
    parent_session_id: str = ""
    """For a child session: the session that started it (``loom sessions`` lists it under that one)."""
    agent: str = ""
    """The agent definition a child runs as."""

    @property
    def context_ratio(self) -> float | None:
        """The watermark: ``context_used / context_window`` (None before the first model call)."""
        if self.context_used is None or not self.context_window:
            return None
        return round(self.context_used / self.context_window, 4)


@contextlib.contextmanager
def _reading(home: Path, oldest: int = KNOWN_SCHEMAS.start) -> Iterator[sqlite3.Connection | None]:
    """A read-only connection to ``home``'s database, or None when there is no database yet.

    Args:
        home: the Loom home.
        oldest: the oldest schema version the caller's query matches.

    Raises:
        Unreadable: the file cannot be opened or has a schema this module does not know (or older than ``oldest``).
        OnServer: the store is the dbos engine's Postgres database.
    """
    try:
        database = engine_database(home)
    except ReadFailed as exc:
        raise Unreadable(str(exc)) from exc
    if database is not None:
        raise OnServer("the dbos engine's store is a Postgres database")
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
        if version not in KNOWN_SCHEMAS or version < oldest:
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


_SESSIONS_SINCE = 7
"""The first schema whose ``sessions`` table has ``context_window``, ``title``, ``parent_session_id`` and ``agent``;
older files are read by the server."""


def recent_sessions(home: Path, *, include_archived: bool = False, limit: int = 100) -> list[SessionRow]:
    """Sessions, newest first, as the checkpoints server's ``list_sessions`` gives them (none without a database).

    Raises:
        Unreadable: not a file this module reads (older schemas included); ask the face instead.
    """
    with _reading(home, oldest=_SESSIONS_SINCE) as conn:
        if conn is None:
            return []
        where = "" if include_archived else "WHERE archived=0 "
        rows = conn.execute(
            "SELECT id, cwd, model, mode, archived, context_window, title, parent_session_id, agent, "
            "(SELECT body FROM events WHERE session_id=s.id AND type='context_watermark' ORDER BY seq DESC LIMIT 1), "
            "(SELECT COALESCE(MAX(seq),0) FROM events WHERE session_id=s.id), "
            "(SELECT group_concat(owner, ' ') FROM runs WHERE session_id=s.id AND status IN ('running','queued')), "
            "(SELECT status || ' ' || owner FROM runs WHERE session_id=s.id ORDER BY started DESC LIMIT 1) "
            f"FROM sessions s {where}ORDER BY created DESC LIMIT ?",
            (limit,),
        ).fetchall()
    return [_session(*row) for row in rows]


def _session(
    sid: str,
    cwd: str,
    model: str,
    mode: str,
    archived: int,
    window: int | None,
    title: str,
    parent: str | None,
    agent: str | None,
    mark: str | None,
    last: int,
    owners: str | None,
    last_run: str | None,
) -> SessionRow:
    import json

    watermark = json.loads(mark or "{}")
    going = any(owner_alive(owner) for owner in (owners or "").split())
    state = "archived" if archived else "active" if going else "idle"
    # Approvals live in the process that waits on them; with no daemon, none is pending, and a run recorded as
    # waiting for one whose process is gone shows as needing a resume.
    last_status, _, last_owner = (last_run or "").partition(" ")
    status = session_status(
        archived=bool(archived),
        running=going,
        last_run_status=last_status or None,
        last_run_live=bool(last_status) and owner_alive(last_owner),
    )
    return SessionRow(
        sid,
        cwd,
        model,
        mode,
        bool(archived),
        last,
        state,
        watermark.get("used_tokens"),
        window or watermark.get("window"),
        status,
        clean_title(title),
        parent or "",
        agent or "",
    )


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


def list_runs(home: Path, limit: int) -> list[RunRow]:
    """:func:`recent_runs`, from the checkpoints server when the file is not one this module reads.

    On the dbos engine each run also carries who holds it now (:attr:`RunRow.held_by`).

    Raises:
        ReadFailed: the server cannot read it either.
    """
    try:
        return recent_runs(home, limit)
    except Unreadable:
        import anyio

        from orchestrator.store.peek_server import server_runs

        return anyio.run(server_runs, home, limit)


def run_events(home: Path, run_id: str, *, whole_session: bool = False) -> tuple[RunRow, list[str]] | None:
    """The run with this id (or unique prefix) and its stored events' JSON, or None.

    Like :func:`list_runs`, it asks the checkpoints server when the file is not one this module reads.

    Args:
        home: the Loom home.
        run_id: the run's id or a unique prefix of it.
        whole_session: the events of the run's whole session (as ``loom trace`` reads them), not the run's alone.

    Raises:
        ReadFailed: the server cannot read it either.
    """
    try:
        found = find_run(home, run_id)
        if found is None:
            return None
        return found, session_events(home, found.session_id, None if whole_session else found.id)
    except Unreadable:
        import anyio

        from orchestrator.store.peek_server import server_run

        return anyio.run(server_run, home, run_id, whole_session)
