"""The memory server's ``archive``: a session's notes promoted to its project, through a real MCP client.

Hostile inputs: another session's notes on the same file, a project note of the same key, rows written by other code
with keys that are not UTF-8 or not slugs, a caller naming another session.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp import Client

from servers.memory import build_server
from tests.mcp_calls import call, error_of

pytestmark = pytest.mark.anyio

PROJECT = "/work/project"


@contextlib.asynccontextmanager
async def memory(path: Path, session: str, project: str = PROJECT) -> AsyncIterator[Client]:
    async with Client(build_server(path, project=project, session=session)) as client:
        yield client


async def project_notes(path: Path, project: str = PROJECT) -> dict[str, str]:
    async with memory(path, "s_reader", project) as client:
        index = await call(client, "list", namespace="project")
        return {
            e["key"]: (await call(client, "get", namespace="project", key=e["key"]))["body"] for e in index["notes"]
        }


async def test_a_sessions_notes_are_copied_to_its_project_and_a_second_archive_changes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    async with memory(db, "s_one") as client:
        await call(client, "set", namespace="session", key="build", body="make test")
        await call(client, "set", namespace="session", key="layout", body="src/ holds the code")
        first = await call(client, "archive")
        second = await call(client, "archive")
        still = await call(client, "list", namespace="session")
    assert first["keys"] == ["build", "layout"] and first["renamed"] == {} and first["skipped"] == []
    assert second["keys"] == [] and second["unchanged"] == ["build", "layout"]
    assert await project_notes(db) == {"build": "make test", "layout": "src/ holds the code"}
    assert [e["key"] for e in still["notes"]] == ["build", "layout"]  # copies: the session keeps its own
    assert await project_notes(db, "/elsewhere") == {}  # another project sees none of it


async def test_another_sessions_notes_are_never_promoted_whatever_the_caller_names(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    async with memory(db, "s_victim") as victim:
        await call(victim, "set", namespace="session", key="secret", body="the victim's own note")
    async with memory(db, "s_attacker") as attacker:
        await call(attacker, "set", namespace="session", key="mine", body="attacker's note")
        # The tool takes no session: a name smuggled in is not one of its arguments and reaches nothing.
        done = await attacker.call_tool("archive", {"session": "s_victim", "scope": "s_victim"})
    assert not done.is_error and (done.structured_content or {})["keys"] == ["mine"]  # the extra names are ignored
    assert await project_notes(db) == {"mine": "attacker's note"}


async def test_a_different_project_note_of_the_same_key_is_kept_and_the_sessions_goes_beside_it(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    async with memory(db, "s_first") as first:
        await call(first, "set", namespace="project", key="build", body="the project's own: make all")
    async with memory(db, "s_ab12CD34") as session:
        await call(session, "set", namespace="session", key="build", body="make test")
        done = await call(session, "archive")
        again = await call(session, "archive")
    notes = await project_notes(db)
    assert notes["build"] == "the project's own: make all"  # never overwritten
    renamed = done["renamed"]["build"]
    assert renamed.startswith("build.") and "ab12cd34" in renamed and notes[renamed] == "make test"
    assert done["keys"] == [renamed] and again["keys"] == [] and again["unchanged"] == ["build"]


async def test_rows_other_code_wrote_with_odd_keys_are_skipped_and_named(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    async with memory(db, "s_odd") as client:
        await call(client, "set", namespace="session", key="good", body="fine")
    with sqlite3.connect(db) as conn:  # another program's rows: a key that is not UTF-8, one that is no slug
        rows = [
            (b"\xff\xfebad", "not utf-8 key"),
            ("../../etc/passwd", "a path for a key"),
            ("Title With Spaces", "spaces"),
            ("x" * 200, "too long"),
        ]
        insert = (
            "INSERT INTO notes (namespace, scope, key, body, created, updated) VALUES ('session', 's_odd', ?, ?, 0, 0)"
        )
        for key, body in rows:
            conn.execute(insert, (key, body))
        conn.execute(insert, ("badbody", b"\xc3\x28"))
    async with memory(db, "s_odd") as client:
        done = await call(client, "archive")
    assert done["keys"] == ["good"]
    skipped = " | ".join(done["skipped"])
    assert len(done["skipped"]) == 5
    assert "not UTF-8" in skipped and "not a slug" in skipped and "characters long" in skipped
    assert "the body is not UTF-8 text" in skipped
    assert set(await project_notes(db)) == {"good"}


async def test_a_server_without_a_session_scope_refuses_to_archive(tmp_path: Path) -> None:
    async with memory(tmp_path / "memory.db", "") as client:
        message = await error_of(client, "archive")
    assert "no session scope" in message
