"""The SQL an append runs, as (statement, parameters) pairs, and a batch's transaction run in one go.

:mod:`servers.checkpoints._db` sends every statement to aiosqlite's thread and awaits it: one hand-off there
and back each, about 70 µs here, more when the event loop is busy. A batch with index events (a run's start or
end) is a transaction of four or more statements; :func:`write_in_transaction` runs it whole on the
connection's own thread, so it costs one hand-off like any other append.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Sequence
from typing import Any

MAX_ROWS_PER_INSERT = 500
"""SQLite caps host parameters per statement (32766 on modern builds); 6 per row keeps us far below."""

Statement = tuple[str, Sequence[Any]]

INDEX_TYPES = frozenset(
    {
        "session_created",
        "session_archived",
        "run_queued",
        "run_started",
        "run_resumed",
        "run_finished",
        "model_switched",
        "mode_changed",
    }
)
"""The event types :func:`index_statement` keeps the session and run index in step with."""


def session_of(event: dict[str, Any]) -> str:
    """The session of an event to append, once it is known to have what every stored event needs.

    Raises:
        ValueError: it lacks a string ``session_id`` or ``type``, or a numeric ``ts``.
    """
    sid, kind, ts = event.get("session_id"), event.get("type"), event.get("ts")
    if not isinstance(sid, str) or not isinstance(kind, str) or not isinstance(ts, int | float):
        raise ValueError("every event needs a string session_id and type and a numeric ts")
    return sid


def event_json(event: dict[str, Any]) -> str:
    r"""An event's stored JSON: UTF-8 as it is, or ASCII-escaped when it holds lone surrogates.

    A file name that is not UTF-8 reaches Python as a string with lone surrogates, which SQLite cannot store as
    text ("surrogates not allowed"). JSON's ``\udcff`` escapes keep such a string exactly, so the event reads back
    the same instead of failing the whole batch (and with it the run).
    """
    body = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
    if not body.isascii():
        try:
            body.encode("utf-8")
        except UnicodeEncodeError:
            return json.dumps(event, separators=(",", ":"))
    return body


def insert_statements(rows: Sequence[tuple[Any, ...]]) -> list[Statement]:
    """Multi-row inserts of ``rows`` into ``events``, at most :data:`MAX_ROWS_PER_INSERT` each."""
    statements: list[Statement] = []
    for start in range(0, len(rows), MAX_ROWS_PER_INSERT):
        chunk = rows[start : start + MAX_ROWS_PER_INSERT]
        values = ",".join(["(?,?,?,?,?,?)"] * len(chunk))
        statements.append((f"INSERT INTO events VALUES {values}", [v for row in chunk for v in row]))
    return statements


def index_statement(e: dict[str, Any]) -> Statement | None:
    """What keeps the session and run index in step with event ``e``; None for an event it does not concern."""
    kind = e["type"]
    if kind == "session_created":
        return (
            "INSERT INTO sessions (id, created, cwd, model, mode, parent_session_id, parent_run_id, agent) "
            "VALUES (?,?,?,?,?,?,?,?)",
            (
                e["session_id"],
                e["ts"],
                e.get("cwd", ""),
                e.get("model", ""),
                e.get("mode", "bypass"),
                e.get("parent_session_id", ""),
                e.get("parent_run_id", ""),
                e.get("agent", ""),
            ),
        )
    if kind == "session_archived":
        return "UPDATE sessions SET archived=1 WHERE id=?", (e["session_id"],)
    if kind == "run_queued":
        return (
            "INSERT INTO runs (id, session_id, started, status, model, owner) VALUES (?,?,?,?,?,?)",
            (e["run_id"], e["session_id"], e["ts"], "queued", "", e.get("owner", "")),
        )
    if kind == "run_started":
        # A queued run already has its row: it starts now (again, if a crash left it queued).
        return (
            "INSERT INTO runs (id, session_id, started, status, model, owner) VALUES (?,?,?,?,?,?) "
            "ON CONFLICT(id) DO UPDATE SET started=excluded.started, status='running', model=excluded.model, "
            "owner=excluded.owner, finished=NULL, reason=''",
            (e["run_id"], e["session_id"], e["ts"], "running", e.get("model", ""), e.get("owner", "")),
        )
    if kind == "run_resumed":
        # Running again, under a new owner: a crash now must leave it to be marked interrupted again.
        return (
            "UPDATE runs SET finished=NULL, status='running', reason='', owner=? WHERE id=?",
            (e.get("owner", ""), e["run_id"]),
        )
    if kind == "run_finished":
        return (
            "UPDATE runs SET finished=?, status=?, reason=?, final_text=? WHERE id=?",
            (e["ts"], e["status"], e.get("reason", ""), e.get("final_text", ""), e["run_id"]),
        )
    if kind == "model_switched":
        # The session row's model is the one a reopened session uses; its window goes with it, while the
        # last usage stays until the next watermark measures it against the new window.
        return (
            "UPDATE sessions SET model=?, context_window=? WHERE id=?",
            (e.get("model"), e.get("window"), e["session_id"]),
        )
    if kind == "mode_changed":  # the mode a reopened session's policy starts in
        return "UPDATE sessions SET mode=? WHERE id=?", (e.get("mode", "ask"), e["session_id"])
    return None


def write_in_transaction(conn: sqlite3.Connection, statements: Sequence[Statement]) -> None:
    """Run ``statements`` as one transaction on ``conn`` (in autocommit mode), from the connection's own thread.

    Raises:
        sqlite3.Error: nothing was written (rolled back).
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        for sql, params in statements:
            conn.execute(sql, params)
        conn.execute("COMMIT")
    except BaseException:
        # On some errors (SQLITE_FULL, SQLITE_IOERR) SQLite has already rolled the transaction back, and
        # ROLLBACK would fail with "no transaction is active", hiding the error that says what to do.
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise
