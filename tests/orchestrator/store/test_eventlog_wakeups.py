"""Wake-ups are per session: a reader of one session sleeps through another session's traffic."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from orchestrator.events import Notice, SessionCreated
from orchestrator.face.live import read_page
from orchestrator.store.eventlog import EventLog
from tests.orchestrator.store._eventlog_support import CountingStore

pytestmark = pytest.mark.anyio

OTHER_EVENTS = 1_000


async def test_a_reader_of_one_session_is_not_woken_by_a_thousand_events_of_another(tmp_path: Path) -> None:
    async with CountingStore(tmp_path / "loom.db") as store:
        log = EventLog(store)
        await log.append(
            SessionCreated(session_id="a", cwd="/", model="m"), SessionCreated(session_id="b", cwd="/", model="m")
        )
        woken: list[str] = []
        pages: list[int] = []

        async def wait_for_a() -> None:
            await log.wait_stored("a", 30)
            woken.append("stored")

        async def follow_a() -> None:
            page = await read_page(log, "a", 1, 30, 200, "")
            pages.extend(e.seq or 0 for e in page.events)

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(wait_for_a)
                tg.start_soon(follow_a)
                await anyio.wait_all_tasks_blocked()
                reads_before = store.reads["a"]
                for i in range(0, OTHER_EVENTS, 10):
                    await log.append(*(Notice(session_id="b", text=f"b {i + j}") for j in range(10)))
                await anyio.wait_all_tasks_blocked()
                assert woken == [] and pages == []  # a thousand of b's events later, a's readers still sleep
                assert store.reads["a"] == reads_before  # and asked the store nothing meanwhile
                await log.append(Notice(session_id="a", text="for a"))
    assert woken == ["stored"] and pages == [2]


async def test_a_follower_of_a_busy_session_is_served_from_memory_not_the_store(tmp_path: Path) -> None:
    async with CountingStore(tmp_path / "loom.db") as store:
        log = EventLog(store)
        await log.append(SessionCreated(session_id="b", cwd="/", model="m"))
        seen: list[int] = []
        done = anyio.Event()

        async def follow_b() -> None:
            cursor = 1
            while cursor < 1 + OTHER_EVENTS:
                page = await read_page(log, "b", cursor, 30, 200, "")
                seen.extend(e.seq or 0 for e in page.events)
                cursor = page.next_after_seq
            done.set()

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(follow_b)
                for i in range(OTHER_EVENTS):
                    await log.append(Notice(session_id="b", text=f"b {i}"))
                await done.wait()
    assert seen == list(range(2, 2 + OTHER_EVENTS))
    # One wake-up per batch, each answered from the log's memory: the old log re-read the store every time.
    assert store.reads["b"] == 0


async def test_a_long_poll_on_an_idle_session_reads_the_store_once_at_each_end(tmp_path: Path) -> None:
    async with CountingStore(tmp_path / "loom.db") as store:
        log = EventLog(store)
        await log.append(SessionCreated(session_id="idle", cwd="/", model="m"))
        reopened = EventLog(store)  # another process's view: it holds nothing of this session in memory
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(read_page, reopened, "idle", 1, 0.5, 200, "")
                for i in range(50):
                    await log.append(Notice(session_id="busy", text=f"busy {i}"))
    assert store.reads["idle"] == 2
