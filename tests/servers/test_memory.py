"""The memory server through a real MCP client: in-process (both eras) and as ``python -m servers.memory``."""

from __future__ import annotations

import contextlib
import sqlite3
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from servers.memory import MAX_BODY_BYTES, SCHEMA_VERSION, build_server
from tests.mcp_calls import call, error_of
from tests.servers._support import IN_PROCESS_MODES, REPO_ROOT

pytestmark = pytest.mark.anyio


@contextlib.asynccontextmanager
async def connected(path: Path, mode: str = "auto", *, project: str = "", session: str = "") -> AsyncIterator[Client]:
    async with Client(build_server(path, project=project, session=session), mode=mode) as client:
        yield client


@pytest.mark.parametrize("mode", IN_PROCESS_MODES)
async def test_tools_and_their_hints(tmp_path: Path, mode: str) -> None:
    async with connected(tmp_path / "memory.db", mode) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == {"set", "get", "list", "search", "delete", "notes_md", "archive"}
    hints = {name: t.annotations for name, t in tools.items()}
    assert all(h is not None for h in hints.values())
    read_only = {name for name, h in hints.items() if h and h.read_only_hint}
    assert read_only == {"get", "list", "search", "notes_md"}
    assert hints["set"] is not None and hints["set"].idempotent_hint
    assert hints["delete"] is not None and hints["delete"].destructive_hint
    archive = hints["archive"]
    assert archive is not None and archive.idempotent_hint and not archive.destructive_hint


@pytest.mark.parametrize("mode", IN_PROCESS_MODES)
async def test_set_get_list_and_update_keep_times(tmp_path: Path, mode: str) -> None:
    async with connected(tmp_path / "memory.db", mode) as client:
        first = await call(client, "set", namespace="project", key="build", body="Run make.\nThen test.")
        assert first["created_note"] is True
        note = first["note"]
        assert note["created"] == note["updated"] > 0
        got = await call(client, "get", namespace="project", key="build")
        assert got == note
        second = await call(client, "set", namespace="project", key="build", body="Run just.")
        assert second["created_note"] is False
        assert second["note"]["created"] == note["created"]
        assert second["note"]["updated"] >= note["updated"]
        assert (await call(client, "get", namespace="project", key="build"))["body"] == "Run just."
        await call(client, "set", namespace="project", key="alpha", body="\n  First line here\nsecond")
        await call(client, "set", namespace="user", key="name", body="Ada")
        index = await call(client, "list", namespace="project")
        assert [(e["key"], e["summary"]) for e in index["notes"]] == [
            ("alpha", "First line here"),
            ("build", "Run just."),
        ]
        assert (await call(client, "list", namespace="session"))["notes"] == []


async def test_search_is_case_insensitive_with_snippets(tmp_path: Path) -> None:
    async with connected(tmp_path / "memory.db") as client:
        await call(client, "set", namespace="project", key="db", body="We use SQLite in WAL mode.")
        await call(client, "set", namespace="user", key="prefs", body="Likes sqlite; dislikes YAML.")
        await call(client, "set", namespace="user", key="other", body="Nothing relevant. Ünïcode ÉCOLE")
        found = await call(client, "search", query="sqlite")
        assert [(m["namespace"], m["key"]) for m in found["matches"]] == [("project", "db"), ("user", "prefs")]
        assert "SQLite" in found["matches"][0]["snippet"]
        only_user = await call(client, "search", query="SQLITE", namespace="user")
        assert [m["key"] for m in only_user["matches"]] == ["prefs"]
        assert [m["key"] for m in (await call(client, "search", query="école"))["matches"]] == ["other"]
        assert [m["key"] for m in (await call(client, "search", query="100%"))["matches"]] == []
        assert "empty" in await error_of(client, "search", query="  ")


async def test_delete_removes_and_reports_missing(tmp_path: Path) -> None:
    async with connected(tmp_path / "memory.db") as client:
        await call(client, "set", namespace="session", key="todo", body="x")
        assert await call(client, "delete", namespace="session", key="todo") == {"namespace": "session", "key": "todo"}
        assert "no note 'todo'" in await error_of(client, "get", namespace="session", key="todo")
        assert "nothing was deleted" in await error_of(client, "delete", namespace="session", key="todo")


async def test_notes_md_renders_a_namespace(tmp_path: Path) -> None:
    async with connected(tmp_path / "memory.db") as client:
        assert (await call(client, "notes_md", namespace="user"))["markdown"] == "# user\n\n_(no notes)_\n"
        await call(client, "set", namespace="user", key="zeta", body="last\n")
        await call(client, "set", namespace="user", key="alpha", body="first\nmore")
        await call(client, "set", namespace="project", key="elsewhere", body="not here")
        md = (await call(client, "notes_md", namespace="user"))["markdown"]
    assert md == "# user\n\n## alpha\n\nfirst\nmore\n\n## zeta\n\nlast\n"


async def test_notes_persist_across_reopen(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "memory.db"
    async with connected(path) as client:
        await call(client, "set", namespace="user", key="editor", body="vim")
    async with connected(path, "legacy") as client:
        assert (await call(client, "get", namespace="user", key="editor"))["body"] == "vim"
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == (str(SCHEMA_VERSION),)


async def test_bad_inputs_get_clear_errors(tmp_path: Path) -> None:
    async with connected(tmp_path / "memory.db") as client:
        assert "unknown namespace 'global'" in await error_of(client, "set", namespace="global", key="k", body="b")
        assert "unknown namespace" in await error_of(client, "list", namespace="")
        assert "unknown namespace" in await error_of(client, "search", query="x", namespace="nope")
        assert "key is empty" in await error_of(client, "set", namespace="user", key="", body="b")
        assert "not a slug" in await error_of(client, "set", namespace="user", key="Has Space", body="b")
        assert "limit is 64" in await error_of(client, "set", namespace="user", key="k" * 65, body="b")
        assert "body is empty" in await error_of(client, "set", namespace="user", key="k", body=" \n")
        too_big = "é" * (MAX_BODY_BYTES // 2 + 1)
        assert "64 KiB" in await error_of(client, "set", namespace="user", key="k", body=too_big)
        await call(client, "set", namespace="user", key="k", body="x" * MAX_BODY_BYTES)
        assert (await call(client, "list", namespace="user"))["notes"][0]["key"] == "k"


async def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    async with connected(path) as client:
        await call(client, "set", namespace="user", key="k", body="b")
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION + 1),))
        conn.commit()
    async with connected(path) as client:
        assert "newer" in await error_of(client, "get", namespace="user", key="k")


async def test_an_unopenable_database_is_reported(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    async with connected(blocker / "memory.db") as client:
        assert "cannot open the memory database" in await error_of(client, "list", namespace="user")


def keys(result: dict[str, Any], field: str = "notes") -> list[str]:
    return [entry["key"] for entry in result[field]]


@pytest.mark.parametrize("mode", IN_PROCESS_MODES)
async def test_projects_on_one_file_keep_their_project_notes_apart(tmp_path: Path, mode: str) -> None:
    path = tmp_path / "memory.db"
    # Both servers hold the file open at once, as two Loom sessions in different projects would.
    async with (
        connected(path, mode, project="/src/alpha", session="s1") as alpha,
        connected(path, mode, project="/src/beta", session="s2") as beta,
    ):
        await call(alpha, "set", namespace="project", key="build", body="alpha builds with make")
        assert (await call(beta, "set", namespace="project", key="build", body="beta builds with just"))["created_note"]
        await call(alpha, "set", namespace="project", key="only-alpha", body="alpha secret")
        await call(alpha, "set", namespace="user", key="editor", body="vim everywhere")

        assert (await call(alpha, "get", namespace="project", key="build"))["body"] == "alpha builds with make"
        assert (await call(beta, "get", namespace="project", key="build"))["body"] == "beta builds with just"
        assert "no note 'only-alpha'" in await error_of(beta, "get", namespace="project", key="only-alpha")
        assert keys(await call(alpha, "list", namespace="project")) == ["build", "only-alpha"]
        assert keys(await call(beta, "list", namespace="project")) == ["build"]
        assert "alpha" not in (await call(beta, "notes_md", namespace="project"))["markdown"]
        assert keys(await call(beta, "search", query="secret"), "matches") == []
        assert keys(await call(beta, "search", query="alpha", namespace="project"), "matches") == []
        assert keys(await call(beta, "search", query="builds"), "matches") == ["build"]
        assert "nothing was deleted" in await error_of(beta, "delete", namespace="project", key="only-alpha")

        # user notes are one namespace for everybody
        assert (await call(beta, "get", namespace="user", key="editor"))["body"] == "vim everywhere"
        assert [(m["namespace"], m["key"]) for m in (await call(beta, "search", query="vim"))["matches"]] == [
            ("user", "editor")
        ]
        await call(beta, "delete", namespace="project", key="build")
        assert (await call(alpha, "get", namespace="project", key="build"))["body"] == "alpha builds with make"
    # and a server without a project scope sees neither project's notes
    async with connected(path) as unscoped:
        assert (await call(unscoped, "list", namespace="project"))["notes"] == []
        assert keys(await call(unscoped, "list", namespace="user")) == ["editor"]


async def test_sessions_on_one_file_keep_their_session_notes_apart(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    async with (
        connected(path, project="/src/alpha", session="s1") as first,
        connected(path, "legacy", project="/src/alpha", session="s2") as second,
    ):
        await call(first, "set", namespace="session", key="todo", body="first session's plan")
        await call(first, "set", namespace="project", key="layout", body="src/ and tests/")
        assert (await call(second, "list", namespace="session"))["notes"] == []
        assert "no note 'todo'" in await error_of(second, "get", namespace="session", key="todo")
        assert keys(await call(second, "search", query="plan"), "matches") == []
        assert (await call(second, "notes_md", namespace="session"))["markdown"] == "# session\n\n_(no notes)_\n"
        await call(second, "set", namespace="session", key="todo", body="second session's plan")
        assert (await call(first, "get", namespace="session", key="todo"))["body"] == "first session's plan"
        # the same project: its notes are shared by both sessions
        assert (await call(second, "get", namespace="project", key="layout"))["body"] == "src/ and tests/"
    with contextlib.closing(sqlite3.connect(path)) as conn:
        rows = conn.execute("SELECT namespace, scope, key FROM notes ORDER BY namespace, scope").fetchall()
    assert rows == [("project", "/src/alpha", "layout"), ("session", "s1", "todo"), ("session", "s2", "todo")]


async def test_scoped_notes_persist_for_a_new_server_with_the_same_scopes(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    async with connected(path, project="/src/alpha", session="s1") as client:
        await call(client, "set", namespace="project", key="build", body="make")
        await call(client, "set", namespace="session", key="todo", body="resume here")
    async with connected(path, "legacy", project="/src/alpha", session="s1") as client:
        assert (await call(client, "get", namespace="project", key="build"))["body"] == "make"
        assert (await call(client, "get", namespace="session", key="todo"))["body"] == "resume here"
        index = await call(client, "list", namespace="session")
        assert [(e["key"], e["summary"]) for e in index["notes"]] == [("todo", "resume here")]
        assert index["notes"][0]["updated"] > 0
    async with connected(path, project="/src/alpha", session="s2") as client:
        assert (await call(client, "get", namespace="project", key="build"))["body"] == "make"
        assert (await call(client, "list", namespace="session"))["notes"] == []


async def test_a_version_1_database_is_migrated_keeping_its_notes(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    with contextlib.closing(sqlite3.connect(path)) as conn:
        # the schema as version 1 of the server wrote it
        conn.executescript(
            """
            CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
            CREATE TABLE notes (
                namespace TEXT NOT NULL, key TEXT NOT NULL, body TEXT NOT NULL,
                created REAL NOT NULL, updated REAL NOT NULL,
                PRIMARY KEY (namespace, key)
            );
            INSERT INTO meta VALUES ('schema_version', '1');
            INSERT INTO notes VALUES ('user', 'editor', 'vim', 10.0, 11.0);
            INSERT INTO notes VALUES ('project', 'build', 'make', 20.0, 21.0);
            INSERT INTO notes VALUES ('session', 'todo', 'old plan', 30.0, 31.0);
            """
        )
        conn.commit()
    async with connected(path) as client:
        assert await call(client, "get", namespace="project", key="build") == {
            "namespace": "project",
            "key": "build",
            "body": "make",
            "created": 20.0,
            "updated": 21.0,
        }
        assert (await call(client, "get", namespace="session", key="todo"))["body"] == "old plan"
    async with connected(path, project="/src/alpha", session="s1") as client:
        assert (await call(client, "get", namespace="user", key="editor"))["body"] == "vim"
        assert (await call(client, "list", namespace="project"))["notes"] == []
        assert (await call(client, "set", namespace="project", key="build", body="just"))["created_note"]
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == (str(SCHEMA_VERSION),)
        assert SCHEMA_VERSION == 2
        columns = {row[1]: row for row in conn.execute("PRAGMA table_info(notes)")}
        assert columns["scope"][2:5] == ("TEXT", 1, "''")  # type, notnull, default
        assert [name for name, row in columns.items() if row[5]] == ["namespace", "scope", "key"]  # primary key
        rows = conn.execute("SELECT namespace, scope, key, body FROM notes ORDER BY namespace, scope").fetchall()
        assert not conn.execute("SELECT 1 FROM sqlite_master WHERE name='notes_v2'").fetchall()
    assert rows == [
        ("project", "", "build", "make"),
        ("project", "/src/alpha", "build", "just"),
        ("session", "", "todo", "old plan"),
        ("user", "", "editor", "vim"),
    ]


async def test_serves_over_stdio(tmp_path: Path) -> None:
    db = tmp_path / "home" / "memory.db"
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "servers.memory", "--db", str(db)], cwd=str(REPO_ROOT)
    )
    async with Client(params) as client:
        assert (await call(client, "set", namespace="project", key="k", body="over stdio"))["created_note"]
        assert (await call(client, "get", namespace="project", key="k"))["body"] == "over stdio"
    with contextlib.closing(sqlite3.connect(db)) as conn:
        assert conn.execute("SELECT namespace, key, body FROM notes").fetchall() == [("project", "k", "over stdio")]


async def test_stdio_takes_project_and_session_scopes(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    args = ["-m", "servers.memory", "--db", str(db), "--project", "/src/alpha", "--session", "s1"]
    async with Client(StdioServerParameters(command=sys.executable, args=args, cwd=str(REPO_ROOT))) as client:
        await call(client, "set", namespace="project", key="build", body="make")
        await call(client, "set", namespace="session", key="todo", body="plan")
        await call(client, "set", namespace="user", key="editor", body="vim")
    with contextlib.closing(sqlite3.connect(db)) as conn:
        rows = conn.execute("SELECT namespace, scope, key FROM notes ORDER BY namespace").fetchall()
    assert rows == [("project", "/src/alpha", "build"), ("session", "s1", "todo"), ("user", "", "editor")]
    async with connected(db, project="/src/alpha", session="s1") as client:
        assert (await call(client, "get", namespace="session", key="todo"))["body"] == "plan"


async def test_instructions_and_namespace_help_say_who_owns_project_and_session_notes(tmp_path: Path) -> None:
    server = build_server(tmp_path / "memory.db", project="/src/alpha", session="s1")
    assert server.instructions is not None
    assert "belong to the current project" in server.instructions
    assert "to the current session" in server.instructions
    async with Client(server) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    for name in ("set", "get", "list", "delete", "notes_md"):
        assert "current project" in tools[name].input_schema["properties"]["namespace"]["description"]


async def test_many_servers_may_create_one_new_database_at_once(tmp_path: Path) -> None:
    # Sessions starting together on a fresh Loom home each open their memory server on the one file;
    # switching a new file to WAL used to fail with "database is locked" for all but the first.
    import anyio

    from servers.memory._db import Database

    for attempt in range(10):
        path = tmp_path / f"fresh-{attempt}" / "memory.db"
        opened: list[Database] = []

        async def open_one() -> None:
            opened.append(await Database.open(path, project="p", session=f"s{len(opened)}"))  # noqa: B023

        async with anyio.create_task_group() as tg:
            for _ in range(8):
                tg.start_soon(open_one)
        try:
            assert len(opened) == 8
            await opened[0].set("user", "k", "v")
            note = await opened[-1].get("user", "k")
            assert note is not None and note.body == "v"
        finally:
            for db in opened:
                await db.close()
