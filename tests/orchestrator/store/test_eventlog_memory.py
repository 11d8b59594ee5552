"""A follower served from the log's memory gets exactly what the store has: same events, same order, same pages."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.events import EVENT_ADAPTER, Event, Notice, SessionArchived, SessionCreated
from orchestrator.face.live import read_page
from orchestrator.store.checkpoints import CheckpointStore
from orchestrator.store.eventlog import IDLE_TAILS, TAIL_EVENTS, EventLog
from orchestrator.store.interface import StoreError
from tests.orchestrator.store._eventlog_support import CountingStore, run_end, run_start, step

pytestmark = pytest.mark.anyio


def wire(events: list[Event]) -> list[object]:
    """The events as a client receives them."""
    return [EVENT_ADAPTER.dump_python(e, mode="json") for e in events]


async def write_runs(log: EventLog, session_id: str, runs: int, steps: int) -> None:
    for r in range(runs):
        run_id = f"r{r}"
        await log.append(*run_start(session_id, run_id))
        for n in range(1, steps + 1):
            for batch in step(session_id, run_id, n):
                await log.append(*batch)
        if r < runs - 1:
            await log.append(*run_end(session_id, run_id, steps))


async def test_every_cursor_and_limit_reads_the_same_from_memory_as_from_the_store(tmp_path: Path) -> None:
    async with CountingStore(tmp_path / "loom.db") as store:
        log = EventLog(store)
        await log.append(SessionCreated(session_id="s", cwd="/w", model="scripted:x"))
        await write_runs(log, "s", runs=3, steps=20)  # 3 runs of 86 events: more than memory holds
        newest = log.last_seq("s")
        assert newest is not None and newest > TAIL_EVENTS
        from_memory = 0
        for after in range(newest + 2):
            for limit in (1, 7, 200):
                held = log.stored_since("s", after, limit)
                stored = await store.read_events("s", after_seq=after, limit=limit)
                if held is None:
                    assert after < newest - TAIL_EVENTS + 1  # only a cursor older than the tail goes to the store
                    continue
                from_memory += 1
                assert wire(held) == wire(stored), (after, limit)
                assert held == stored
        assert from_memory == 3 * (TAIL_EVENTS + 2)


async def test_read_page_gives_the_same_pages_from_memory_as_a_log_that_holds_nothing(tmp_path: Path) -> None:
    async with CountingStore(tmp_path / "loom.db") as store:
        log = EventLog(store)
        await log.append(SessionCreated(session_id="s", cwd="/w", model="scripted:x"))
        await write_runs(log, "s", runs=2, steps=30)
        newest = log.last_seq("s")
        assert newest is not None
        cold = EventLog(store)  # a log that wrote nothing: every page comes from the store
        for after in (0, 1, newest - TAIL_EVENTS - 1, newest - TAIL_EVENTS, newest - 10, newest - 1, newest):
            for limit in (3, 200):
                store.reads.clear()
                warm_page = await read_page(log, "s", after, 0, limit, None)
                warm_reads = store.reads["s"]
                cold_page = await read_page(cold, "s", after, 0, limit, None)
                assert warm_page.model_dump(mode="json") == cold_page.model_dump(mode="json"), (after, limit)
                assert store.reads["s"] == warm_reads + 1
                # Only a cursor older than the tail made the warm log ask the store.
                assert warm_reads == (1 if after < newest - TAIL_EVENTS else 0), (after, limit)


async def test_a_finished_run_is_served_from_memory_but_nothing_newer_is_taken_on_trust(tmp_path: Path) -> None:
    async with CountingStore(tmp_path / "loom.db") as store:
        log = EventLog(store)
        await log.append(SessionCreated(session_id="s", cwd="/w", model="scripted:x"))
        await write_runs(log, "s", runs=1, steps=3)
        await log.append(*run_end("s", "r0", 3))
        newest = (await store.read_events("s"))[-1].seq
        assert newest is not None and log.last_seq("s") is None  # no run in progress
        held = log.stored_since("s", newest - 3, 200)
        assert held is not None and wire(held) == wire(await store.read_events("s", after_seq=newest - 3))
        # At the newest event memory cannot know that no other process wrote since: the store answers.
        assert log.stored_since("s", newest, 200) is None
        store.reads.clear()
        page = await read_page(log, "s", newest, 0, 200, None)
        assert page.events == [] and store.reads["s"] == 1


async def test_a_numbering_gap_or_a_failed_append_sends_readers_back_to_the_store(tmp_path: Path) -> None:
    path = tmp_path / "loom.db"
    async with CheckpointStore(path) as store:
        log = EventLog(store)
        await log.append(SessionCreated(session_id="s", cwd="/w", model="m"), Notice(session_id="s", text="1"))
        await store.append([Notice(session_id="s", text="written past the log")])  # seq 3, unknown to the log
        await log.append(Notice(session_id="s", text="4"))
        assert log.stored_since("s", 3, 200) is not None
        assert log.stored_since("s", 2, 200) is None  # memory starts again after the gap: seq 3 is the store's
        assert [e.seq for e in await store.read_events("s", after_seq=2)] == [3, 4]
        await store.aclose()
        with pytest.raises(StoreError):
            await log.append(Notice(session_id="s", text="never stored"))
        assert log.stored_since("s", 4, 200) is None and log.last_seq("s") is None


async def test_memory_keeps_every_running_session_and_a_bounded_number_of_idle_ones(tmp_path: Path) -> None:
    async with CheckpointStore(tmp_path / "loom.db") as store:
        log = EventLog(store)
        idle = [f"idle{i}" for i in range(IDLE_TAILS + 5)]
        for sid in idle:
            await log.append(SessionCreated(session_id=sid, cwd="/", model="m"), *run_start(sid, "r"))
            await log.append(*run_end(sid, "r", 0))
        running = [f"run{i}" for i in range(IDLE_TAILS + 5)]
        for sid in running:
            await log.append(SessionCreated(session_id=sid, cwd="/", model="m"), *run_start(sid, "r"))
        await log.append(SessionArchived(session_id=idle[-1]))
        assert all(log.stored_since(sid, 1, 10) is not None for sid in running)
        assert [sid for sid in idle if log.stored_since(sid, 1, 10) is not None] == idle[5:-1]
