"""The checkpoints server through a real MCP client: in-process (both eras) and as `loom server checkpoints`."""

from __future__ import annotations

import base64
import contextlib
import json
import sqlite3
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from servers.checkpoints import SCHEMA_VERSION, build_server
from servers.checkpoints._db import Database, DatabaseError, describe
from servers.checkpoints._server import StoreLocation
from tests.mcp_calls import call, error_of
from tests.servers._support import IN_PROCESS_MODES

pytestmark = pytest.mark.anyio

LOOM = str(Path(sys.executable).with_name("loom"))


def created(sid: str, ts: float = 1.0) -> dict[str, Any]:
    return {"type": "session_created", "session_id": sid, "ts": ts, "cwd": "/x", "model": "m", "mode": "ask"}


def notice(sid: str, text: str, run_id: str | None = None) -> dict[str, Any]:
    return {"type": "notice", "session_id": sid, "ts": 2.0, "run_id": run_id, "text": text}


@contextlib.asynccontextmanager
async def connected(path: StoreLocation, mode: str = "auto", *, read_only: bool = False) -> AsyncIterator[Client]:
    async with Client(build_server(path, read_only=read_only), mode=mode) as client:
        yield client


def events_of(found: dict[str, Any]) -> list[dict[str, Any]]:
    """The events of a read_events result: the store returns each as its stored JSON text."""
    return [json.loads(text) for text in found["events"]]


@pytest.mark.parametrize("mode", IN_PROCESS_MODES)
async def test_tools_serve_the_runtime_and_say_which_only_read(tmp_path: Path, mode: str) -> None:
    async with connected(tmp_path / "loom.db", mode) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == {
        "status",
        "append_events",
        "read_events",
        "find_tool_result",
        "read_context",
        "get_session",
        "list_sessions",
        "set_session_title",
        "get_run",
        "find_run",
        "list_runs",
        "list_runs_with_status",
        "snapshot_file",
        "list_snapshots",
        "read_snapshot",
    }
    read_only = {name for name, t in tools.items() if t.annotations and t.annotations.read_only_hint}
    assert read_only == set(tools) - {"append_events", "snapshot_file", "set_session_title"}


@pytest.mark.parametrize("argument", ["after_seq", "before_seq", "limit"])
async def test_an_integer_sqlite_cannot_hold_is_refused_as_bad_input(
    store_location: StoreLocation, argument: str
) -> None:
    # 2**63 cannot be bound to a query: it once failed inside the database call with no word of what was wrong.
    async with connected(store_location) as client:
        await call(client, "append_events", events=[created("a")])
        error = await error_of(client, "read_events", session_id="a", **{argument: 2**63})
        assert argument in error and f"less than or equal to {2**63 - 1}" in error
        largest = await call(client, "read_events", session_id="a", **{argument: 2**63 - 1})
    assert len(events_of(largest)) == (0 if argument == "after_seq" else 1)


@pytest.mark.parametrize("mode", IN_PROCESS_MODES)
async def test_events_are_numbered_per_session_and_kept_as_sent(store_location: StoreLocation, mode: str) -> None:
    async with connected(store_location, mode) as client:
        first = await call(client, "append_events", events=[created("a"), notice("a", "één"), created("b")])
        second = await call(client, "append_events", events=[notice("a", "two", run_id="r_1")])
        assert (first["seqs"], second["seqs"]) == ([1, 2, 1], [3])
        events = events_of(await call(client, "read_events", session_id="a"))
        assert [(e["seq"], e["type"]) for e in events] == [(1, "session_created"), (2, "notice"), (3, "notice")]
        assert events[1] == {**notice("a", "één"), "seq": 2}
        assert [
            e["seq"] for e in events_of(await call(client, "read_events", session_id="a", after_seq=1, limit=1))
        ] == [2]
        by_run = events_of(await call(client, "read_events", session_id="a", run_id="r_1"))
        assert [e["text"] for e in by_run] == ["two"]
        session = (await call(client, "get_session", session_id="a"))["session"]
        assert session is not None and (session["mode"], session["last_seq"]) == ("ask", 3)
    async with connected(store_location, mode) as client:  # numbering continues after a reopen
        assert (await call(client, "append_events", events=[notice("a", "three")]))["seqs"] == [4]


async def test_run_index_follows_run_events(store_location: StoreLocation) -> None:
    started = {"type": "run_started", "session_id": "s", "run_id": "r_abc", "ts": 5.0, "model": "m", "owner": "1:2"}
    finished = {
        "type": "run_finished",
        "session_id": "s",
        "run_id": "r_abc",
        "ts": 6.0,
        "status": "completed",
        "reason": "end_turn",
        "final_text": "ok",
    }
    async with connected(store_location) as client:
        await call(client, "append_events", events=[created("s"), started])
        assert [r["id"] for r in (await call(client, "list_runs_with_status", status="running"))["runs"]] == ["r_abc"]
        await call(client, "append_events", events=[finished, {**created("t"), "ts": 9.0}])
        run = (await call(client, "get_run", run_id="r_abc"))["run"]
        assert (run["status"], run["final_text"], run["owner"], run["finished"]) == ("completed", "ok", "1:2", 6.0)
        assert (await call(client, "find_run", prefix="r_a"))["run"]["id"] == "r_abc"
        assert (await call(client, "find_run", prefix="r%"))["run"] is None  # LIKE wildcards are literal
        assert [r["id"] for r in (await call(client, "list_runs", session_id="s"))["runs"]] == ["r_abc"]
        await call(client, "append_events", events=[{"type": "session_archived", "session_id": "t", "ts": 10.0}])
        assert [s["id"] for s in (await call(client, "list_sessions"))["sessions"]] == ["s"]
        listed = (await call(client, "list_sessions", include_archived=True))["sessions"]
        assert [(s["id"], s["archived"]) for s in listed] == [("t", True), ("s", False)]


async def test_a_resumed_run_is_running_again_under_its_new_owner(store_location: StoreLocation) -> None:
    # So that a crash during the resumed run leaves it to be marked interrupted, like any running run.
    started = {"type": "run_started", "session_id": "s", "run_id": "r_x", "ts": 5.0, "model": "m", "owner": "1:2"}
    stopped = {"type": "run_finished", "session_id": "s", "run_id": "r_x", "ts": 6.0, "status": "interrupted"}
    resumed = {"type": "run_resumed", "session_id": "s", "run_id": "r_x", "ts": 7.0, "owner": "3:4", "after_step": 2}
    async with connected(store_location) as client:
        await call(client, "append_events", events=[created("s"), started, stopped])
        assert (await call(client, "get_run", run_id="r_x"))["run"]["status"] == "interrupted"
        await call(client, "append_events", events=[resumed])
        run = (await call(client, "get_run", run_id="r_x"))["run"]
        running = (await call(client, "list_runs_with_status", status="running"))["runs"]
    assert (run["status"], run["owner"], run["finished"]) == ("running", "3:4", None)
    assert [r["id"] for r in running] == ["r_x"]


async def test_a_queued_run_is_indexed_then_starts_under_the_same_id(store_location: StoreLocation) -> None:
    queued = {"type": "run_queued", "session_id": "s", "run_id": "r_q", "ts": 4.0, "text": "hi", "owner": "1:2"}
    started = {"type": "run_started", "session_id": "s", "run_id": "r_q", "ts": 6.0, "model": "m", "owner": "3:4"}
    async with connected(store_location) as client:
        await call(client, "append_events", events=[created("s"), queued])
        waiting = (await call(client, "list_runs_with_status", status="queued"))["runs"]
        await call(client, "append_events", events=[started])
        run = (await call(client, "get_run", run_id="r_q"))["run"]
    assert [r["id"] for r in waiting] == ["r_q"]
    assert (run["status"], run["owner"], run["model"], run["started"]) == ("running", "3:4", "m", 6.0)


async def test_a_batch_is_stored_whole_or_not_at_all(store_location: StoreLocation) -> None:
    started = {"type": "run_started", "session_id": "s", "run_id": "r", "ts": 1.0, "model": "m"}
    async with connected(store_location) as client:
        await call(client, "append_events", events=[created("s"), started])
        # the same session created twice violates the sessions primary key: the notice before it must not stay
        message = await error_of(client, "append_events", events=[notice("s", "lost"), created("s")])
        assert "could not write to the Loom database" in message
        assert [e["type"] for e in events_of(await call(client, "read_events", session_id="s"))] == [
            "session_created",
            "run_started",
        ]
        # alone, it is numbered 1 without a look-up (a first event), which the events' key refuses just the same
        message = await error_of(client, "append_events", events=[created("s")])
        assert "could not write to the Loom database" in message
        assert (await call(client, "append_events", events=[notice("s", "next")]))["seqs"] == [3]


async def test_events_without_session_type_or_time_are_refused(store_location: StoreLocation) -> None:
    async with connected(store_location) as client:
        message = await error_of(client, "append_events", events=[notice("s", "ok"), {"type": "notice"}])
        assert "session_id" in message
        assert events_of(await call(client, "read_events", session_id="s")) == []


async def test_file_snapshots_keep_the_first_content_per_checkpoint(store_location: StoreLocation) -> None:
    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    async with connected(store_location) as client:
        args = {"session_id": "s", "checkpoint": "r_1:1"}
        assert (await call(client, "snapshot_file", **args, path="a.txt", content_b64=b64(b"\x00old")))["recorded"]
        assert not (await call(client, "snapshot_file", **args, path="a.txt", content_b64=b64(b"new")))["recorded"]
        await call(client, "snapshot_file", **args, path="new.txt", content_b64=None)
        await call(client, "snapshot_file", session_id="s", checkpoint="r_1:2", path="a.txt", content_b64=b64(b"x"))
        listed = (await call(client, "list_snapshots", session_id="s", checkpoint="r_1:1"))["snapshots"]
        assert sorted((s["path"], s["existed"], s["size"]) for s in listed) == [
            ("a.txt", True, 4),
            ("new.txt", False, 0),
        ]
        assert len((await call(client, "list_snapshots", session_id="s"))["snapshots"]) == 3
        content = await call(client, "read_snapshot", **args, path="a.txt")
        assert content["found"] and base64.b64decode(content["content_b64"]) == b"\x00old"
        gone = await call(client, "read_snapshot", **args, path="new.txt")
        assert (gone["found"], gone["existed"], gone["content_b64"]) == (True, False, None)
        assert not (await call(client, "read_snapshot", **args, path="other"))["found"]
        assert "base64" in await error_of(client, "snapshot_file", **args, path="b", content_b64="%%%")


V3_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO meta VALUES ('schema_version', '3');
CREATE TABLE sessions (
    id TEXT PRIMARY KEY, created REAL NOT NULL, cwd TEXT NOT NULL, model TEXT NOT NULL,
    mode TEXT NOT NULL DEFAULT 'bypass', archived INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE runs (
    id TEXT PRIMARY KEY, session_id TEXT NOT NULL, started REAL NOT NULL, finished REAL,
    status TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '', final_text TEXT NOT NULL DEFAULT '',
    model TEXT NOT NULL, owner TEXT NOT NULL DEFAULT ''
);
CREATE INDEX runs_by_session ON runs (session_id, started);
CREATE TABLE events (
    session_id TEXT NOT NULL, seq INTEGER NOT NULL, run_id TEXT, type TEXT NOT NULL,
    ts REAL NOT NULL, body TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
CREATE INDEX events_by_run ON events (run_id, seq);
INSERT INTO sessions VALUES ('s_old', 1.0, '/x', 'm', 'ask', 0);
INSERT INTO runs VALUES ('r_old', 's_old', 1.0, 2.0, 'completed', 'end_turn', 'done', 'm', '7:8');
INSERT INTO events VALUES ('s_old', 1, NULL, 'session_created', 1.0,
    '{"seq":1,"session_id":"s_old","ts":1.0,"type":"session_created","cwd":"/x","model":"m","mode":"ask"}');
"""
"""A database as the orchestrator's own SQLite store (schema 3) left it."""


async def test_a_version_3_database_is_migrated_in_place(tmp_path: Path) -> None:
    path = tmp_path / "loom.db"
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.executescript(V3_SCHEMA)
    async with connected(path) as client:
        assert (await call(client, "status"))["schema_version"] == SCHEMA_VERSION
        assert (await call(client, "get_run", run_id="r_old"))["run"]["owner"] == "7:8"
        assert events_of(await call(client, "read_events", session_id="s_old"))[0]["mode"] == "ask"
        assert (await call(client, "append_events", events=[notice("s_old", "new")]))["seqs"] == [2]
        await call(client, "snapshot_file", session_id="s_old", checkpoint="c", path="p", content_b64=None)
        session = (await call(client, "get_session", session_id="s_old"))["session"]
        assert (session["context_used"], session["context_window"]) == (None, None)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == (str(SCHEMA_VERSION),)
        assert conn.execute("SELECT count(*) FROM snapshots").fetchone() == (1,)


V4_SCHEMA = (
    V3_SCHEMA.replace("('schema_version', '3')", "('schema_version', '4')")
    + """
CREATE TABLE snapshots (
    session_id TEXT NOT NULL, checkpoint TEXT NOT NULL, path TEXT NOT NULL,
    existed INTEGER NOT NULL, content BLOB, ts REAL NOT NULL,
    PRIMARY KEY (session_id, checkpoint, path));
INSERT INTO snapshots VALUES ('s_old', 'r_old', 'a.txt', 1, X'6f6c64', 1.5);
INSERT INTO events VALUES ('s_old', 2, 'r_old', 'tool_call_finished', 1.5,
    '{"seq":2,"session_id":"s_old","ts":1.5,"type":"tool_call_finished","run_id":"r_old","step":1,'
    || '"call_id":"c_old","tool":"fs__read","is_error":false,"content":"old","duration_ms":1.0}');
"""
)
"""A database as schema 4 (file snapshots, no context columns) left it."""


async def test_a_version_4_database_gains_a_context_gauge_that_starts_empty(tmp_path: Path) -> None:
    path = tmp_path / "loom.db"
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.executescript(V4_SCHEMA)
    watermark = {
        "type": "context_watermark",
        "session_id": "s_old",
        "ts": 3.0,
        "model": "m",
        "used_tokens": 900,
        "window": 1000,
        "ratio": 0.9,
        "threshold": 0.8,
        "source": "estimate",
    }
    async with connected(path) as client:
        assert (await call(client, "status"))["schema_version"] == SCHEMA_VERSION
        session = (await call(client, "get_session", session_id="s_old"))["session"]
        assert (session["model"], session["mode"]) == ("m", "ask")
        assert (session["context_used"], session["context_window"]) == (None, None)
        assert (await call(client, "read_snapshot", session_id="s_old", checkpoint="r_old", path="a.txt"))["found"]
        found = (await call(client, "find_tool_result", session_id="s_old", call_id="c_old"))["event"]
        assert json.loads(found)["content"] == "old"  # the migration indexed the results already stored
        assert (await call(client, "append_events", events=[watermark]))["seqs"] == [3]
        session = (await call(client, "get_session", session_id="s_old"))["session"]
        assert (session["context_used"], session["context_window"], session["last_seq"]) == (900, 1000, 3)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == (str(SCHEMA_VERSION),)


async def test_a_newer_schema_is_refused_with_advice(tmp_path: Path) -> None:
    path = tmp_path / "loom.db"
    async with connected(path) as client:
        await call(client, "append_events", events=[created("s")])
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION + 1),))
        conn.commit()
    async with connected(path) as client:
        message = await error_of(client, "status")
        assert "newer Loom" in message and "upgrade Loom" in message
        assert "newer Loom" in await error_of(client, "read_events", session_id="s")
    with contextlib.closing(sqlite3.connect(path)) as conn:  # refused, not touched
        assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == (
            str(SCHEMA_VERSION + 1),
        )


async def test_a_read_only_database_reads_and_refuses_writes_plainly(tmp_path: Path) -> None:
    path = tmp_path / "loom.db"
    async with connected(path) as client:
        await call(client, "append_events", events=[created("s"), notice("s", "kept")])
    async with connected(path, read_only=True) as client:
        assert (await call(client, "status"))["read_only"]
        message = await error_of(client, "append_events", events=[notice("s", "lost")])
        assert "read-only" in message and str(path) in message
        assert len(events_of(await call(client, "read_events", session_id="s"))) == 2
    async with connected(path) as client:
        assert (await call(client, "append_events", events=[notice("s", "next")]))["seqs"] == [3]


async def test_an_unopenable_database_is_reported_by_every_tool(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    async with connected(blocker / "loom.db") as client:
        assert "cannot open the Loom database" in await error_of(client, "status")
        assert "cannot open the Loom database" in await error_of(client, "get_run", run_id="r")


async def test_loom_server_checkpoints_serves_over_stdio(tmp_path: Path) -> None:
    db = tmp_path / "home" / "loom.db"
    params = StdioServerParameters(command=LOOM, args=["server", "checkpoints", "--db", str(db)])
    async with Client(params) as client:
        assert (await call(client, "append_events", events=[created("s"), notice("s", "hi")]))["seqs"] == [1, 2]
        info = await call(client, "status")
    assert info == {"path": str(db), "schema_version": SCHEMA_VERSION, "read_only": False}
    with contextlib.closing(sqlite3.connect(db)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert conn.execute("SELECT type FROM events ORDER BY seq").fetchall() == [("session_created",), ("notice",)]


def test_sqlite_failures_come_with_advice(tmp_path: Path) -> None:
    with contextlib.closing(sqlite3.connect(tmp_path / "x.db")) as conn:
        conn.execute("CREATE TABLE t (x BLOB)")
        conn.execute("PRAGMA max_page_count=3")  # a full disk, as SQLite reports it
        with pytest.raises(sqlite3.OperationalError) as caught:
            conn.execute("INSERT INTO t VALUES (?)", (b"x" * 100_000,))
    message = describe("could not write to", tmp_path / "x.db", caught.value)
    assert message.startswith(f"could not write to the Loom database at {tmp_path / 'x.db'}: ")
    assert "the disk is full" in message


async def test_a_full_disk_loses_only_the_batch_that_did_not_fit(tmp_path: Path) -> None:
    db = await Database.open(tmp_path / "loom.db")
    try:
        assert await db.append([created("s")]) == [1]
        async with db._conn.execute("PRAGMA page_count") as cur:  # the test reaches in to simulate a full disk
            row = await cur.fetchone()
        assert row is not None
        await db._conn.execute(f"PRAGMA max_page_count={row[0]}")
        with pytest.raises(DatabaseError, match="the disk is full"):
            await db.append([notice("s", "x" * 100_000)])
        await db._conn.execute("PRAGMA max_page_count=1073741823")
        assert await db.append([notice("s", "fits")]) == [2]
        assert len(await db.read_events("s")) == 2
    finally:
        await db.close()


async def test_many_processes_may_open_a_new_database_at_once(store_location: StoreLocation) -> None:
    # Headless runs started together all find a fresh home: creating the schema must not race.
    path = store_location
    versions: list[int] = []

    async def open_one(n: int) -> None:
        async with connected(path) as client:
            versions.append((await call(client, "status"))["schema_version"])
            await call(client, "append_events", events=[created(f"s{n}")])

    async with anyio.create_task_group() as tg:
        for n in range(6):
            tg.start_soon(open_one, n)
    assert versions == [SCHEMA_VERSION] * 6
