"""The checkpoints server on Postgres: what only a shared database has (notifications, reconnection, the URL).

The tools' shared behaviour runs on both backends in the other checkpoints tests (``store_location``); these tests
share one database per module where they do not interfere (each its own session ids).
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest
from mcp import Client, StdioServerParameters

from servers.checkpoints import SCHEMA_VERSION, build_server
from servers.checkpoints._errors import DatabaseError
from servers.checkpoints._pg import EVENTS_CHANNEL, PostgresDatabase
from servers.checkpoints._pg_errors import mask_url
from servers.checkpoints._pg_schema import PG_BASE_VERSION, PG_MIGRATIONS
from servers.checkpoints._schema import MIGRATIONS
from tests.mcp_calls import call, error_of
from tests.servers.test_checkpoints import created, notice

pytestmark = pytest.mark.anyio

LOOM = str(Path(sys.executable).with_name("loom"))


def finished(sid: str, call_id: str, content: str) -> dict[str, Any]:
    return {
        "type": "tool_call_finished",
        "session_id": sid,
        "run_id": "r",
        "ts": 3.0,
        "step": 1,
        "call_id": call_id,
        "tool": "fs__read",
        "is_error": False,
        "content": content,
        "duration_ms": 1.0,
    }


async def test_every_append_notifies_each_session_it_wrote_with_its_last_seq(module_database: str) -> None:
    db = await PostgresDatabase.open(module_database)
    listener = await psycopg.AsyncConnection.connect(module_database, autocommit=True)
    try:
        await listener.execute(f"LISTEN {EVENTS_CHANNEL}")
        await db.append([created("n_a"), notice("n_a", "one"), created("n_b")])
        with pytest.raises(DatabaseError):  # rolled back: no notification for it
            await db.append([notice("n_b", "lost"), created("n_b")])
        await db.append([notice("n_b", "two")])
        with anyio.fail_after(5):
            got = [n.payload async for n in listener.notifies(timeout=5, stop_after=3)]
    finally:
        await listener.close()
        await db.close()
    assert sorted(got[:2]) == ["n_a:2", "n_b:1"] and got[2] == "n_b:2"


async def test_two_connections_appending_to_one_session_get_consecutive_seqs(module_database: str) -> None:
    first, second = await PostgresDatabase.open(module_database), await PostgresDatabase.open(module_database)

    async def writer(db: PostgresDatabase, name: str) -> None:
        for i in range(40):
            await db.append([notice("c_s", f"{name}{i}-{k}") for k in range(1 + i % 3)])

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(writer, first, "a")
            tg.start_soon(writer, second, "b")
        stored = [json.loads(body) for body in await first.read_events("c_s")]
    finally:
        await first.close()
        await second.close()
    assert [e["seq"] for e in stored] == list(range(1, 2 * sum(1 + i % 3 for i in range(40)) + 1))
    for name in "ab":  # each writer's events, all there, in its own order
        mine = [e["text"] for e in stored if e["text"].startswith(name)]
        assert mine == [f"{name}{i}-{k}" for i in range(40) for k in range(1 + i % 3)]


async def test_text_postgres_cannot_hold_is_kept_in_the_event_and_cleaned_in_the_index(module_database: str) -> None:
    db = await PostgresDatabase.open(module_database)
    try:
        odd = "bad\x00name \udcff.txt"
        ended = {"type": "run_finished", "session_id": "t_s", "run_id": "t_r", "ts": 2.0, "status": "completed"}
        started = {"type": "run_started", "session_id": "t_s", "run_id": "t_r", "ts": 1.0, "model": "m"}
        await db.append([{**created("t_s"), "cwd": odd}, started, {**ended, "final_text": odd}])
        await db.append([finished("t_s", "c\udcff", odd)])
        found = await db.find_tool_result("t_s", "c\udcff")
        (run,) = await db.runs("WHERE id=?", ("t_r",))
    finally:
        await db.close()
    assert found is not None and json.loads(found)["content"] == odd  # exactly as sent
    assert run["final_text"] == "bad\ufffdname ?.txt"


async def test_a_connection_the_server_dropped_fails_one_call_then_comes_back(module_database: str) -> None:
    db = await PostgresDatabase.open(module_database)
    try:
        await db.append([created("d_s")])
        with psycopg.connect(module_database, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid != pg_backend_pid() "
                "AND datname = current_database() AND application_name = 'loom'"
            )
        with pytest.raises(DatabaseError, match="could not write to the Loom database at postgresql://"):
            await db.append([notice("d_s", "lost")])
        assert await db.append([notice("d_s", "back")]) == [2]
    finally:
        await db.close()


async def test_the_cli_serves_a_postgres_store_and_status_hides_the_password(module_database: str) -> None:
    url = module_database.replace("postgresql://loom@", "postgresql://loom:hunter2-secret@", 1)
    if url == module_database:
        pytest.skip("LOOM_TEST_POSTGRES has credentials of its own")
    params = StdioServerParameters(command=LOOM, args=["server", "checkpoints", "--db", url])
    async with Client(params) as client:
        assert (await call(client, "append_events", events=[created("p_s"), notice("p_s", "hi")]))["seqs"] == [1, 2]
        info = await call(client, "status")
    assert info == {"path": mask_url(url), "schema_version": SCHEMA_VERSION, "read_only": False}
    assert "hunter2" not in info["path"] and ":***@" in info["path"]


async def test_a_new_database_opened_read_only_says_to_open_it_read_write_first(fresh_database: str) -> None:
    async with Client(build_server(fresh_database, read_only=True)) as client:
        message = await error_of(client, "status")
    assert "open it once read-write to create it" in message


async def test_a_store_a_newer_loom_wrote_is_refused_with_advice(fresh_database: str) -> None:
    db = await PostgresDatabase.open(fresh_database)  # creates the store
    await db.close()
    with psycopg.connect(fresh_database, autocommit=True) as conn:
        conn.execute("UPDATE loom.meta SET value=%s WHERE key='schema_version'", (str(SCHEMA_VERSION + 1),))
    with pytest.raises(DatabaseError, match="newer Loom.*upgrade Loom"):
        await PostgresDatabase.open(fresh_database)


def test_every_sqlite_migration_past_the_postgres_base_has_a_postgres_twin() -> None:
    assert set(PG_MIGRATIONS) == {v for v in MIGRATIONS if v > PG_BASE_VERSION}
    assert max([PG_BASE_VERSION, *PG_MIGRATIONS]) == SCHEMA_VERSION


@pytest.mark.parametrize(
    ("url", "advice"),
    [
        ("postgresql://loom:s3cret-pw@127.0.0.1:1/loom", "is Postgres running and reachable there?"),
        ("postgresql://loom:s3cret-pw@127.0.0.1:notaport/loom", "not a valid Postgres connection URL"),
        ("postgres://loom@127.0.0.1:1/loom?password=s3cret-pw&sslmode=disable", "is Postgres running"),
    ],
)
async def test_a_wrong_url_is_a_clear_error_without_the_password(url: str, advice: str) -> None:
    with pytest.raises(DatabaseError) as caught:
        await PostgresDatabase.open(url)
    message = str(caught.value)
    assert message.startswith("cannot open the Loom database at postgres") and advice in message
    assert "s3cret-pw" not in message and "***" in message


async def test_a_missing_database_says_to_create_it(postgres_url: str) -> None:
    missing = postgres_url.rsplit("/", 1)[0] + "/loom_no_such_db"
    with pytest.raises(DatabaseError, match=r"does not exist; create it \(createdb NAME\)"):
        await PostgresDatabase.open(missing)


async def test_the_server_reports_an_unreachable_store_on_every_tool() -> None:
    async with Client(build_server("postgresql://loom:s3cret-pw@127.0.0.1:1/loom")) as client:
        message = await error_of(client, "get_run", run_id="r")
    assert "cannot open the Loom database at postgresql://loom:***@127.0.0.1:1/loom" in message
    assert "s3cret-pw" not in message


async def test_a_url_of_another_kind_is_refused_as_such() -> None:
    async with Client(build_server("mysql://root:pw@host/db")) as client:
        message = await error_of(client, "status")
    assert "mysql://root:***@host/db is not a store Loom can open" in message


async def test_both_backends_store_the_same_text_for_the_same_events(module_database: str, tmp_path: Path) -> None:
    from servers.checkpoints._db import Database

    batch = [created("same"), notice("same", "één \udcff"), finished("same", "c1", "x" * 10), notice("same", "end")]
    sqlite = await Database.open(tmp_path / "loom.db")
    postgres = await PostgresDatabase.open(module_database)
    try:
        assert await sqlite.append(batch) == await postgres.append(batch) == [1, 2, 3, 4]
        assert await sqlite.read_events("same") == await postgres.read_events("same")
        assert await sqlite.find_tool_result("same", "c1") == await postgres.find_tool_result("same", "c1")
    finally:
        await sqlite.close()
        await postgres.close()


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://u:p@ss/w@host:5/db", "postgresql://u:***@host:5/db"),  # unescaped @ and / in the password
        ("postgresql://u:pw@h/d?password=zzz&x=1", "postgresql://u:***@h/d?password=***&x=1"),
        ("postgresql://u:pw@h/d?application_name=a@b", "postgresql://u:***@h/d?application_name=a@b"),
        ("postgresql://u@[::1]:5432/db", "postgresql://u@[::1]:5432/db"),
        ("postgres://host:5432/db", "postgres://host:5432/db"),
    ],
)
def test_a_url_is_shown_with_every_password_masked_and_nothing_else_changed(url: str, shown: str) -> None:
    assert mask_url(url) == shown


async def test_appends_cancelled_midway_leave_the_connection_and_the_numbering_whole(module_database: str) -> None:
    db = await PostgresDatabase.open(module_database)
    try:
        for delay in (0.0, 0.001, 0.003, 0.01):
            with anyio.move_on_after(delay):
                async with anyio.create_task_group() as tg:
                    for n in range(5):
                        tg.start_soon(db.append, [notice("x_s", f"{delay}-{n}-{k}") for k in range(20)])
        (last,) = await db.append([notice("x_s", "after")])
        stored = [json.loads(body) for body in await db.read_events("x_s")]
    finally:
        await db.close()
    assert [e["seq"] for e in stored] == list(range(1, last + 1))
    batches = Counter(e["text"].rsplit("-", 1)[0] for e in stored[:-1])
    assert set(batches.values()) <= {20}  # every cancelled batch is there whole or not at all
