"""The orchestrator's store as a client of the checkpoints server: the Store contract, errors, migration."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import sys
from pathlib import Path

import anyio
import pytest
from mcp import StdioServerParameters

from orchestrator.events import (
    ContextWatermark,
    Event,
    ModelSwitched,
    Notice,
    RunFinished,
    RunStarted,
    SessionCreated,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    UserMessage,
)
from orchestrator.store.checkpoints import CheckpointStore
from orchestrator.store.eventlog import EventLog
from orchestrator.store.interface import StoreError
from servers.checkpoints import SCHEMA_VERSION, build_server
from servers.checkpoints._server import StoreLocation

pytestmark = pytest.mark.anyio

REPO_ROOT = Path(__file__).resolve().parents[3]


async def test_events_are_numbered_per_session_and_read_back_in_order(store_location: StoreLocation) -> None:
    async with CheckpointStore(store_location) as store:
        a: list[Event] = [SessionCreated(session_id="a", cwd="/x", model="m"), Notice(session_id="a", text="one")]
        b = [SessionCreated(session_id="b", cwd="/y", model="m")]
        await store.append(a)
        await store.append(b)
        await store.append([Notice(session_id="a", text="two")])
        assert [e.seq for e in a] == [1, 2] and b[0].seq == 1
        events = await store.read_events("a")
        assert [(e.seq, e.type) for e in events] == [(1, "session_created"), (2, "notice"), (3, "notice")]
        assert [e.seq for e in await store.read_events("a", after_seq=2)] == [3]
    # numbering continues after a reopen
    async with CheckpointStore(store_location) as store:
        await store.append([Notice(session_id="a", text="three")])
        assert [e.seq for e in await store.read_events("a")] == [1, 2, 3, 4]


async def test_run_index_follows_run_events(store_location: StoreLocation) -> None:
    async with CheckpointStore(store_location) as store:
        await store.append(
            [
                SessionCreated(session_id="s", cwd="/x", model="m"),
                RunStarted(session_id="s", run_id="r_1", model="m", max_steps=5),
                UserMessage(session_id="s", run_id="r_1", text="hi"),
            ]
        )
        run = await store.get_run("r_1")
        assert run is not None and run.status == "running"
        await store.append(
            [RunFinished(session_id="s", run_id="r_1", status="completed", reason="end_turn", final_text="ok", steps=1)]
        )
        run = await store.get_run("r_1")
        assert run is not None and (run.status, run.final_text) == ("completed", "ok")
        assert [e.type for e in await store.read_events("s", run_id="r_1")] == [
            "run_started",
            "user_message",
            "run_finished",
        ]
        assert (await store.find_run("r_")) is not None
        session = await store.get_session("s")
        assert session is not None and session.last_seq == 4


def _watermark(session_id: str, used: int, window: int) -> ContextWatermark:
    return ContextWatermark(
        session_id=session_id,
        run_id="r_1",
        step=1,
        model="big",
        used_tokens=used,
        window=window,
        ratio=used / window,
        threshold=0.8,
        source="provider",
    )


def _finished(session_id: str, call_id: str, content: str, run_id: str = "r_1") -> ToolCallFinished:
    return ToolCallFinished(
        session_id=session_id,
        run_id=run_id,
        step=1,
        call_id=call_id,
        tool="fs__read",
        is_error=False,
        content=content,
        duration_ms=1.0,
    )


async def test_session_context_follows_watermarks_and_model_switches(store_location: StoreLocation) -> None:
    path = store_location
    async with CheckpointStore(path) as store:
        await store.append([SessionCreated(session_id="s", cwd="/x", model="big")])
        fresh = await store.get_session("s")
        assert fresh is not None and (fresh.context_used, fresh.context_window) == (None, None)
        await store.append([_watermark("s", 10_000, 200_000)])
        await store.append([_watermark("s", 60_000, 200_000)])
        measured = await store.get_session("s")
        assert measured is not None and (measured.context_used, measured.context_window) == (60_000, 200_000)
        await store.append([ModelSwitched(session_id="s", model="small", previous="big", window=32_000)])
    async with CheckpointStore(path) as store:  # a reopened session uses the switched model
        [listed] = await store.list_sessions()
    assert (listed.model, listed.context_used, listed.context_window) == ("small", 60_000, 32_000)


async def test_find_tool_result_returns_the_latest_finish_of_a_call(store_location: StoreLocation) -> None:
    async with CheckpointStore(store_location) as store:
        events: list[Event] = [SessionCreated(session_id="s", cwd="/x", model="m")]
        for n in range(50):
            arguments = {"path": f"f{n}"}
            events.append(
                ToolCallStarted(session_id="s", run_id="r_1", step=1, call_id=f"c{n}", tool="t", arguments=arguments)
            )
            events.append(_finished("s", f"c{n}", f"content {n}"))
        await store.append(events)
        # a resumed run finishes c3 again; another session has a call of its own
        await store.append([_finished("s", "c3", "rerun", run_id="r_1"), _finished("t", "t1", "other session")])
        found = await store.find_tool_result("s", "c41")
        assert found is not None and (found.call_id, found.content) == ("c41", "content 41")
        appended = [e for e in events if isinstance(e, ToolCallFinished) and e.call_id == "c41"]
        assert [found] == appended  # what was appended, seq included
        again = await store.find_tool_result("s", "c3")
        assert again is not None and again.content == "rerun"
        assert await store.find_tool_result("s", "missing") is None
        assert await store.find_tool_result("s", "t1") is None


async def test_live_only_events_are_refused(tmp_path: Path) -> None:
    async with CheckpointStore(tmp_path / "loom.db") as store:
        with pytest.raises(ValueError):
            await store.append([TextDelta(session_id="s", run_id="r", step=1, text="x")])


async def test_database_uses_wal(tmp_path: Path) -> None:
    async with CheckpointStore(tmp_path / "loom.db"):
        pass
    with contextlib.closing(sqlite3.connect(tmp_path / "loom.db")) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


async def test_newer_schema_is_refused_with_advice(tmp_path: Path) -> None:
    async with CheckpointStore(tmp_path / "loom.db"):
        pass
    conn = sqlite3.connect(tmp_path / "loom.db")
    conn.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION + 1),))
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="newer Loom.*upgrade Loom"):
        async with CheckpointStore(tmp_path / "loom.db"):
            pass


async def test_unwritable_location_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(StoreError, match="cannot open the Loom database"):
        async with CheckpointStore(blocker / "loom.db"):
            pass


async def test_failed_write_keeps_what_was_stored(store_location: StoreLocation) -> None:
    async with CheckpointStore(store_location) as store:
        await store.append([SessionCreated(session_id="s", cwd="/x", model="m")])
        await store.append([RunStarted(session_id="s", run_id="r", model="m", max_steps=1)])
        with pytest.raises(StoreError):  # the same session created twice violates the sessions primary key
            await store.append(
                [Notice(session_id="s", text="lost"), SessionCreated(session_id="s", cwd="/x", model="m")]
            )
        assert [e.type for e in await store.read_events("s")] == ["session_created", "run_started"]
        await store.append([Notice(session_id="s", text="next")])
        assert [e.seq for e in await store.read_events("s")] == [1, 2, 3]


async def test_subscribers_get_stored_events_in_seq_order_and_live_deltas(store_location: StoreLocation) -> None:
    async with CheckpointStore(store_location) as store:
        log = EventLog(store)
        async with log.subscribe() as received:

            async def writer(n: int) -> None:
                for i in range(20):
                    await log.append(Notice(session_id="s", text=f"{n}-{i}"))

            async with anyio.create_task_group() as tg:
                for n in range(3):
                    tg.start_soon(writer, n)
            log.publish_live(TextDelta(session_id="s", run_id="r", step=1, text="x"))
            log.close_subscribers()
            got = [e async for e in received]
    seqs = [e.seq for e in got if e.seq is not None]
    assert seqs == list(range(1, 61))
    assert got[-1].type == "text_delta" and got[-1].seq is None


async def test_a_version_1_database_is_migrated_in_place(tmp_path: Path) -> None:
    path = tmp_path / "loom.db"
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.executescript(
            """
            CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
            INSERT INTO meta VALUES ('schema_version', '1');
            CREATE TABLE sessions (id TEXT PRIMARY KEY, created REAL NOT NULL, cwd TEXT NOT NULL, model TEXT NOT NULL);
            INSERT INTO sessions VALUES ('s_old', 1.0, '/x', 'scripted:demo');
            CREATE TABLE runs (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, started REAL NOT NULL, finished REAL,
                status TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '', final_text TEXT NOT NULL DEFAULT '',
                model TEXT NOT NULL);
            INSERT INTO runs (id, session_id, started, status, model) VALUES ('r_old', 's_old', 1.0, 'completed', 'm');
            """
        )
    async with CheckpointStore(path) as store:
        session = await store.get_session("s_old")
        run = await store.get_run("r_old")
    assert session is not None and (session.mode, session.archived) == ("bypass", False)
    assert (session.context_used, session.context_window) == (None, None)
    assert run is not None and (run.status, run.owner) == ("completed", "")
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == (str(SCHEMA_VERSION),)


async def test_a_read_only_database_fails_appends_plainly_and_loses_nothing(store_location: StoreLocation) -> None:
    path = store_location
    async with CheckpointStore(path) as store:
        await store.append([SessionCreated(session_id="s", cwd="/x", model="m")])
    async with CheckpointStore(path, read_only=True) as store:
        lost = Notice(session_id="s", text="lost")
        with pytest.raises(StoreError, match=r"^could not write to the Loom database at .*read-only"):
            await store.append([lost])
        assert lost.seq is None
        assert [e.type for e in await store.read_events("s")] == ["session_created"]
    async with CheckpointStore(path) as store:
        await store.append([Notice(session_id="s", text="next")])
        assert [e.seq for e in await store.read_events("s")] == [1, 2]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes read-only files anyway")
async def test_a_file_without_write_permission_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "loom.db"
    async with CheckpointStore(path) as store:
        await store.append([SessionCreated(session_id="s", cwd="/x", model="m")])
    path.chmod(0o444)
    with pytest.raises(StoreError, match="read-only"):
        async with CheckpointStore(path) as store:
            await store.append([Notice(session_id="s", text="lost")])


async def test_the_store_can_use_a_checkpoints_server_over_stdio(tmp_path: Path) -> None:
    path = tmp_path / "loom.db"
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "servers.checkpoints", "--db", str(path)], cwd=str(REPO_ROOT)
    )
    async with CheckpointStore(path, target=params) as store:
        events: list[Event] = [
            SessionCreated(session_id="s", cwd="/x", model="m"),
            UserMessage(session_id="s", run_id="r", text="hi"),
        ]
        await store.append(events)
        assert [e.seq for e in events] == [1, 2]
        assert await store.read_events("s") == events


async def test_a_server_that_cannot_open_the_database_fails_on_entry(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(StoreError, match="^cannot open the Loom database at"):
        async with CheckpointStore(tmp_path / "ignored", target=build_server(blocker / "loom.db")):
            pass


async def test_checkpoint_tools_stay_out_of_the_hub(tmp_path: Path) -> None:
    # The store is its own MCP client: a session's hub (what the model sees) has no checkpoints tools.
    from orchestrator.models.scripted import Script, ScriptedModel
    from orchestrator.runtime.embedded import embedded_runtime

    model = ScriptedModel(Script(turns=[]))
    async with embedded_runtime(tmp_path) as runtime, runtime.open_session(tmp_path, model) as session:
        servers = {tool.server for tool in session.hub.tools}
        names = {tool.remote_name for tool in session.hub.tools}
    assert servers == {"fs", "shell", "memory", "loom"}
    assert not names & {"append_events", "read_events", "snapshot_file", "find_tool_result"}


async def test_a_stored_row_that_is_not_a_tool_result_is_reported_not_returned(tmp_path: Path) -> None:
    path = tmp_path / "loom.db"
    async with CheckpointStore(path) as store:
        await store.append([SessionCreated(session_id="s", cwd="/x", model="m")])
    with contextlib.closing(sqlite3.connect(path)) as conn:  # a row whose type column and body disagree
        body = '{"seq":2,"session_id":"s","ts":1.0,"type":"notice","text":"x","call_id":"c"}'
        conn.execute("INSERT INTO events VALUES ('s', 2, NULL, 'tool_call_finished', 1.0, ?)", (body,))
        conn.commit()
    async with CheckpointStore(path) as store:
        with pytest.raises(StoreError, match="with a notice event"):
            await store.find_tool_result("s", "c")
