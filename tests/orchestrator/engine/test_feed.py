"""A process that did not write an event serves it as if it had: the feed over a shared Postgres database.

Each test has a "worker" log and a "face" log, each over its own store on one database (in one test the worker is
a real separate process); the face learns what the worker stored and streamed only through the feed.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import psycopg
import pytest
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectSendStream
from mcp.server.subscriptions import InMemorySubscriptionBus, ResourceUpdated, ServerEvent

from orchestrator.engine.feed import (
    MAX_PAYLOAD_BYTES,
    QUEUE_EVENTS,
    FeedError,
    LivePublisher,
    RemoteFeed,
    live_payloads,
)
from orchestrator.events import Event, Notice, SessionCreated, TextDelta, ToolCallDelta, ToolProgress
from orchestrator.face.live import read_page
from orchestrator.face.subscriptions import Watches
from orchestrator.store.checkpoints import CheckpointStore
from orchestrator.store.eventlog import EventLog

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[3]
DELIVERY_S = 5.0
"""The most a stored event or a live delta may take to reach the other log's followers here (they take ms)."""
LONG_TEXT = ('Ünïcode, "quotes", \\ and a tab\t: ' + "x" * 60 + "\n") * 400
"""About 40,000 bytes of JSON: five or more notifications."""


@asynccontextmanager
async def two_logs(url: str) -> AsyncIterator[tuple[EventLog, EventLog]]:
    """A worker's log and a face's, each over a store of its own on the database at ``url``."""
    async with CheckpointStore(url) as worker_store, CheckpointStore(url) as face_store:
        yield EventLog(worker_store), EventLog(face_store)


async def follow(log: EventLog, session_id: str, after_seq: int, seen: MemoryObjectSendStream[Event]) -> None:
    """A follower as the face serves one: page after page from ``after_seq``, each event sent on ``seen``."""
    cursor = ""
    while True:
        page = await read_page(log, session_id, after_seq, 30, 100, cursor)
        for event in page.events:
            await seen.send(event)
        after_seq = page.next_after_seq
        cursor = page.live.cursor if page.live is not None else ""


def delta(text: str, session_id: str = "x") -> TextDelta:
    return TextDelta(session_id=session_id, run_id="r", step=1, text=text)


async def test_a_follower_of_the_face_sees_what_the_worker_stored_and_a_reader_of_another_session_sleeps(
    fresh_database: str,
) -> None:
    async with two_logs(fresh_database) as (worker, face), RemoteFeed(fresh_database, face):
        await worker.append(SessionCreated(session_id="x", cwd="/", model="m"))
        await worker.append(SessionCreated(session_id="y", cwd="/", model="m"))
        await face.append(Notice(session_id="x", text="queued by the face"))  # the face holds x's newest: seq 2
        with anyio.fail_after(DELIVERY_S):  # the face has heard of y's first event: what wakes y now is new
            while face.newest_held("y") != 1:
                await face.wait_stored("y", 0.05)
        y_woken = anyio.Event()

        async def wait_y(*, task_status: anyio.abc.TaskStatus[None]) -> None:
            waiting = face.wait_stored("y", math.inf)
            task_status.started()  # this task runs on into the wait, and registers, before the test goes on
            await waiting
            y_woken.set()

        send, seen = anyio.create_memory_object_stream[Event](100)
        with send, seen:
            async with anyio.create_task_group() as tg:
                await tg.start(wait_y)
                tg.start_soon(follow, face, "x", 2, send)
                for n in range(3):
                    await worker.append(Notice(session_id="x", text=f"stored by the worker {n}"))
                    with anyio.fail_after(DELIVERY_S):
                        event = await seen.receive()
                    assert (
                        isinstance(event, Notice) and event.text == f"stored by the worker {n}" and event.seq == 3 + n
                    )
                assert not y_woken.is_set()  # x's events woke no reader of y
                held = face.stored_since("x", 2, 10)  # what the feed read for the follower is held for the next one
                assert held is not None and [e.seq for e in held] == [3, 4, 5]
                assert face.last_seq("x") == 5  # not the 2 it appended itself
                await worker.append(Notice(session_id="y", text="for y"))
                with anyio.fail_after(DELIVERY_S):
                    await y_woken.wait()
                tg.cancel_scope.cancel()


async def test_a_subscriber_of_the_face_is_told_of_each_burst_the_worker_stored(fresh_database: str) -> None:
    async with two_logs(fresh_database) as (worker, face), RemoteFeed(fresh_database, face):
        await worker.append(SessionCreated(session_id="x", cwd="/", model="m"))
        bus = InMemorySubscriptionBus()
        updates = anyio.Event()
        told: list[str] = []

        def listen(event: ServerEvent) -> None:
            if isinstance(event, ResourceUpdated):
                told.append(event.uri)
                updates.set()

        bus.subscribe(listen)
        async with anyio.create_task_group() as tg:
            await Watches(face, bus, tg).add("loom://sessions/x/state", None)
            for n in range(2):
                await worker.append(Notice(session_id="x", text=f"burst {n}"))
                with anyio.fail_after(DELIVERY_S):
                    await updates.wait()
                updates = anyio.Event()
            assert told == ["loom://sessions/x/state"] * 2
            tg.cancel_scope.cancel()


async def test_live_text_reaches_the_faces_followers_whole_and_once_even_when_split(fresh_database: str) -> None:
    async with (
        two_logs(fresh_database) as (worker, face),
        RemoteFeed(fresh_database, face),
        RemoteFeed(fresh_database, worker),  # the worker also listens: its own text must not come back to it
        LivePublisher(fresh_database, worker),
        face.subscribe() as events,
    ):
        worker.publish_live(delta("Hello. "))
        worker.publish_live(delta(LONG_TEXT))
        pieces: list[str] = []
        with anyio.fail_after(DELIVERY_S):
            while "".join(pieces) != "Hello. " + LONG_TEXT:
                event = await events.receive()
                assert isinstance(event, TextDelta)
                pieces.append(event.text)
        assert len(pieces) >= 1 + 5  # the long delta came as several notifications, joined back in order
        live = face.live("x")
        assert live is not None and live.text == "Hello. " + LONG_TEXT
        # A marker sent after the text reaches the worker's own feed after any echo of it would have.
        async with await psycopg.AsyncConnection.connect(fresh_database, autocommit=True) as conn:
            await conn.execute("SELECT pg_notify('loom_live', %s)", (delta("!", "marker").model_dump_json(),))
        with anyio.fail_after(DELIVERY_S):
            while worker.live("marker") is None:
                await worker.watch("marker").wait()
        mine = worker.live("x")
        assert mine is not None and mine.text == "Hello. " + LONG_TEXT  # once, not twice


async def test_the_feed_survives_its_connection_being_killed_and_readers_catch_up(fresh_database: str) -> None:
    async with two_logs(fresh_database) as (worker, face), RemoteFeed(fresh_database, face) as feed:
        await worker.append(SessionCreated(session_id="x", cwd="/", model="m"))
        send, seen = anyio.create_memory_object_stream[Event](100)
        with send, seen:
            async with anyio.create_task_group() as tg:
                tg.start_soon(follow, face, "x", 1, send)
                async with await psycopg.AsyncConnection.connect(fresh_database, autocommit=True) as conn:
                    cursor = await conn.execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                        " WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE 'LISTEN %%'"
                    )
                    assert [row[0] for row in await cursor.fetchall()] == [True]
                # Stored while the feed is down (its report is likely missed): the follower gets it all the same.
                await worker.append(Notice(session_id="x", text="while the feed was down"))
                with anyio.fail_after(DELIVERY_S + 10):
                    event = await seen.receive()
                assert isinstance(event, Notice) and event.seq == 2
                with anyio.fail_after(DELIVERY_S):
                    await feed.connected.wait()
                assert feed.reconnects == 1
                await worker.append(Notice(session_id="x", text="after"))
                with anyio.fail_after(DELIVERY_S):
                    event = await seen.receive()
                assert isinstance(event, Notice) and event.seq == 3
                tg.cancel_scope.cancel()


async def _writer(tg: TaskGroup, url: str) -> anyio.abc.Process:
    process = await anyio.open_process(
        [sys.executable, "-m", "tests.orchestrator.engine._feed_writer", url, "x"], cwd=REPO
    )
    tg.start_soon(_drain_stderr, process)
    return process


async def _drain_stderr(process: anyio.abc.Process) -> None:
    assert process.stderr is not None
    async for _ in process.stderr:
        pass


async def _say(process: anyio.abc.Process, line: str) -> None:
    assert process.stdin is not None and process.stdout is not None
    await process.stdin.send(line.encode() + b"\n")
    with anyio.fail_after(30):
        assert (await process.stdout.receive()).strip() == b"ok"


async def test_a_separate_worker_process_reaches_the_faces_followers(fresh_database: str) -> None:
    async with CheckpointStore(fresh_database) as store:
        face = EventLog(store)
        await face.append(SessionCreated(session_id="x", cwd="/", model="m"))
        send, seen = anyio.create_memory_object_stream[Event](100)
        with send, seen:
            async with RemoteFeed(fresh_database, face), face.subscribe() as events, anyio.create_task_group() as tg:
                tg.start_soon(follow, face, "x", 1, send)
                process = await _writer(tg, fresh_database)
                try:
                    await _say(process, "notice from another process")
                    with anyio.fail_after(DELIVERY_S):
                        event = await seen.receive()
                    assert isinstance(event, Notice) and event.text == "from another process" and event.seq == 2
                    await _say(process, "delta Streamed elsewhere.")
                    with anyio.fail_after(DELIVERY_S):
                        live = await events.receive()
                        while not isinstance(live, TextDelta):
                            live = await events.receive()
                    assert live.text == "Streamed elsewhere."
                    step = face.live("x")
                    assert step is not None and step.text == "Streamed elsewhere." and step.after_seq == 2
                finally:
                    with anyio.fail_after(30):
                        if process.stdin is not None:
                            await process.stdin.aclose()
                        assert await process.wait() == 0
                    tg.cancel_scope.cancel()


async def test_an_unreachable_database_fails_at_enter_without_showing_the_password(tmp_path: Path) -> None:
    url = "postgresql://loom:s3cret-pw@127.0.0.1:1/loom"
    async with CheckpointStore(tmp_path / "loom.db") as store:
        log = EventLog(store)
        for opened in (RemoteFeed(url, log), LivePublisher(url, log)):
            with pytest.raises(FeedError) as caught:
                async with opened:
                    pass
            message = str(caught.value)
            assert "s3cret-pw" not in message and "postgresql://loom:***@127.0.0.1:1/loom" in message
            assert "is Postgres running" in message
        assert log.live_sink is None


def test_a_long_delta_is_split_into_payloads_postgres_takes_that_join_back() -> None:
    for event in (
        delta(LONG_TEXT),
        ToolCallDelta(session_id="x", run_id="r", step=1, index=0, call_id="c", name="fs__read", arguments=LONG_TEXT),
    ):
        payloads = live_payloads(event)
        assert len(payloads) > 5 and all(len(p.encode()) <= MAX_PAYLOAD_BYTES for p in payloads)
        parts = [json.loads(p) for p in payloads]
        key = "text" if isinstance(event, TextDelta) else "arguments"
        assert "".join(part[key] for part in parts) == LONG_TEXT
    calls = [json.loads(p) for p in live_payloads(event)]
    assert calls[0]["call_id"] == "c" and {c["call_id"] for c in calls[1:]} == {""}
    report = ToolProgress(session_id="x", run_id="r", call_id="c", tool="t", progress=1, message=LONG_TEXT)
    (one,) = live_payloads(report)
    assert len(one.encode()) <= MAX_PAYLOAD_BYTES and LONG_TEXT.startswith(json.loads(one)["message"])


async def test_a_full_publisher_queue_drops_the_oldest_text_and_never_blocks(fresh_database: str) -> None:
    async with two_logs(fresh_database) as (worker, face):
        publisher = LivePublisher(fresh_database, worker)
        report = ToolProgress(session_id="x", run_id="r", call_id="c", tool="t", progress=0.5)
        publisher.offer(report)  # queued before it connects, as while its database is down
        for n in range(QUEUE_EVENTS + 10):
            publisher.offer(delta(f"{n} "))
        assert publisher.dropped == 11
        got: list[Event] = []
        async with RemoteFeed(fresh_database, face), face.subscribe() as events, publisher:
            with anyio.fail_after(DELIVERY_S * 4):
                while len(got) < QUEUE_EVENTS:
                    got.append(await events.receive())
    assert got[0] == report  # the progress report was kept; the eleven oldest pieces of text went
    assert [getattr(e, "text", "") for e in got[1:3]] == ["11 ", "12 "]
    live = face.live("x")
    assert live is not None and live.text == "".join(f"{n} " for n in range(11, QUEUE_EVENTS + 10))
