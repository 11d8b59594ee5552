"""Session titles in the checkpoints server: a version-5 file gains them empty; the newest run's status is listed."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest
from mcp import Client

from servers.checkpoints import SCHEMA_VERSION, build_server
from servers.checkpoints._server import StoreLocation
from tests.mcp_calls import call, error_of
from tests.servers.test_checkpoints import V4_SCHEMA

pytestmark = pytest.mark.anyio

V5_SCHEMA = (
    V4_SCHEMA.replace("('schema_version', '4')", "('schema_version', '5')")
    + "ALTER TABLE sessions ADD COLUMN context_window INTEGER;"
)
"""A database as schema 5 (context window, no titles) left it."""


async def test_a_version_5_database_gains_titles_that_start_empty(tmp_path: Path) -> None:
    path = tmp_path / "loom.db"
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.executescript(V5_SCHEMA)
    async with Client(build_server(path)) as client:
        assert (await call(client, "status"))["schema_version"] == SCHEMA_VERSION
        old = (await call(client, "get_session", session_id="s_old"))["session"]
        assert old["title"] == ""
        assert (await call(client, "set_session_title", session_id="s_old", title="the old one"))["found"]
        assert not (await call(client, "set_session_title", session_id="s_nope", title="x"))["found"]
        too_long = await error_of(client, "set_session_title", session_id="s_old", title="x" * 201)
        (listed,) = (await call(client, "list_sessions"))["sessions"]
    assert listed["title"] == "the old one" and "200" in too_long
    assert (listed["last_run_status"], listed["last_run_owner"]) == ("completed", "7:8")


async def test_a_session_lists_its_newest_runs_status_and_owner(store_location: StoreLocation) -> None:
    def run(run_id: str, ts: float, status: str) -> list[dict[str, object]]:
        started = {"type": "run_started", "session_id": "s", "run_id": run_id, "ts": ts, "model": "m", "owner": "9:9"}
        finished = {"type": "run_finished", "session_id": "s", "run_id": run_id, "ts": ts + 0.5, "status": status}
        return [started, finished]

    created = {"type": "session_created", "session_id": "s", "ts": 1.0, "cwd": "/x", "model": "m"}
    async with Client(build_server(store_location)) as client:
        await call(client, "append_events", events=[created])
        fresh = (await call(client, "get_session", session_id="s"))["session"]
        await call(client, "append_events", events=[*run("r_1", 2.0, "failed"), *run("r_2", 3.0, "completed")])
        await call(client, "append_events", events=run("r_3", 4.0, "failed"))
        latest = (await call(client, "get_session", session_id="s"))["session"]
    assert (fresh["last_run_status"], fresh["last_run_owner"]) == (None, "")
    assert (latest["last_run_status"], latest["last_run_owner"]) == ("failed", "9:9")


async def test_a_child_session_is_listed_with_its_parent_and_agent_and_an_old_file_gains_empty_links(
    tmp_path: Path,
) -> None:
    path = tmp_path / "loom.db"
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.executescript(V5_SCHEMA)
    child = {
        "type": "session_created",
        "session_id": "s_child",
        "ts": 9.0,
        "cwd": "/x",
        "model": "m",
        "parent_session_id": "s_old",
        "parent_run_id": "r_old",
        "agent": "reviewer",
    }
    async with Client(build_server(path)) as client:
        await call(client, "append_events", events=[child])
        listed = {s["id"]: s for s in (await call(client, "list_sessions"))["sessions"]}
    assert (listed["s_old"]["parent_session_id"], listed["s_old"]["agent"]) == ("", "")
    got = listed["s_child"]
    assert (got["parent_session_id"], got["parent_run_id"], got["agent"]) == ("s_old", "r_old", "reviewer")
