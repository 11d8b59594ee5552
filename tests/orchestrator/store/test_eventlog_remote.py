"""What another process stored or streamed, as the feed reports it, reaches this log's readers as its own would.

Two logs over two stores on one SQLite file stand for two processes over one database: the writer's log stores, and
the reader's log is told so the way the feed tells it (``note_remote``, ``receive_live``, ``note_remote_gap``).
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from orchestrator.events import Event, Notice, SessionCreated, TextDelta
from orchestrator.face.live import read_page
from orchestrator.store.checkpoints import CheckpointStore
from orchestrator.store.eventlog import EventLog
from tests.orchestrator.store._eventlog_support import CountingStore, run_start, step

pytestmark = pytest.mark.anyio


def delta(session_id: str, run_id: str, n: int, text: str) -> TextDelta:
    return TextDelta(session_id=session_id, run_id=run_id, step=n, text=text)


async def test_a_report_wakes_that_sessions_readers_and_no_one_elses(tmp_path: Path) -> None:
    async with CheckpointStore(tmp_path / "loom.db") as writer_store, CountingStore(tmp_path / "loom.db") as store:
        writer, reader = EventLog(writer_store), EventLog(store)
        await writer.append(SessionCreated(session_id="x", cwd="/", model="m"))
        await writer.append(SessionCreated(session_id="y", cwd="/", model="m"))
        woken: list[str] = []
        pages: list[list[int]] = []
        paged = anyio.Event()

        async def wait(session_id: str) -> None:
            await reader.wait_stored(session_id, 30)
            woken.append(session_id)

        async def follow_x() -> None:
            page = await read_page(reader, "x", 1, 30, 100, "")
            pages.append([e.seq or 0 for e in page.events])
            paged.set()

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(wait, "x")
                tg.start_soon(wait, "y")
                tg.start_soon(follow_x)
                await anyio.wait_all_tasks_blocked()
                await writer.append(Notice(session_id="x", text="for x"))
                await reader.note_remote("x", 2)
                await paged.wait()  # its read of the store runs in a thread, which wait_all_tasks_blocked misses
                await anyio.wait_all_tasks_blocked()
                assert woken == ["x"] and pages == [[2]]  # y's reader sleeps on
                assert reader.newest_held("x") == 2 and reader.last_seq("x") == 2
                assert reader.stored_since("x", 1, 10) is None  # nothing held: readers go to the store
                reads = store.reads["x"]
                await reader.note_remote("x", 2)  # told again (or its own append told back): nothing to do
                assert store.reads["x"] == reads
                await writer.append(Notice(session_id="y", text="for y"))
                await reader.note_remote("y", 2)
    assert woken == ["x", "y"]


async def test_a_stored_message_ends_the_live_text_another_process_streamed(tmp_path: Path) -> None:
    async with CheckpointStore(tmp_path / "loom.db") as writer_store, CountingStore(tmp_path / "loom.db") as store:
        writer, reader = EventLog(writer_store), EventLog(store)
        await writer.append(SessionCreated(session_id="s", cwd="/", model="m"), *run_start("s", "r"))
        await reader.note_remote("s", 3)
        for piece in ("Step ", "1."):
            reader.receive_live(delta("s", "r", 1, piece))
        live = reader.live("s")
        assert live is not None and live.text == "Step 1." and live.after_seq == 3
        page = await read_page(reader, "s", 3, 0, 100, None)
        assert page.live is not None and page.live.text == "Step 1."
        message, result = step("s", "r", 1)
        await writer.append(*message)
        await reader.note_remote("s", 6)
        assert reader.live("s") is None  # the stored message holds the text now: it is not shown twice
        page = await read_page(reader, "s", 3, 0, 100, None)
        assert [e.type for e in page.events] == ["assistant_message", "context_watermark", "tool_call_started"]
        assert page.live is None
        # What it read to find out is held: the next report is served from memory, one read per report.
        await writer.append(*result)
        reads = store.reads["s"]
        await reader.note_remote("s", 7)
        held = reader.stored_since("s", 6, 10)
        assert held is not None and [e.type for e in held] == ["tool_call_finished"]
        assert store.reads["s"] == reads + 1


async def test_after_a_gap_readers_wake_and_a_step_whose_text_was_cut_is_not_shown_live(tmp_path: Path) -> None:
    async with CheckpointStore(tmp_path / "loom.db") as writer_store, CountingStore(tmp_path / "loom.db") as store:
        writer, reader = EventLog(writer_store), EventLog(store)
        await writer.append(SessionCreated(session_id="s", cwd="/", model="m"), *run_start("s", "r"))
        await reader.note_remote("s", 3)
        reader.receive_live(delta("s", "r", 1, "Before the gap, "))
        woken: list[str] = []

        async def wait(session_id: str) -> None:
            await reader.wait_stored(session_id, 30)
            woken.append(session_id)

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(wait, "s")
                tg.start_soon(wait, "other")
                await anyio.wait_all_tasks_blocked()
                reader.note_remote_gap()
                await anyio.wait_all_tasks_blocked()
                assert sorted(woken) == ["other", "s"]  # every reader reads the store again
        assert reader.newest_held("s") is None and reader.last_seq("s") is None
        reader.receive_live(delta("s", "r", 1, "after it."))
        assert reader.live("s") is None  # half a message would read as the whole of it
        reader.receive_live(delta("s", "r", 2, "Next step."))
        live = reader.live("s")
        assert live is not None and live.text == "Next step."


async def test_live_events_go_to_the_sink_and_received_ones_do_not_go_back_out(tmp_path: Path) -> None:
    sent: list[Event] = []
    async with CheckpointStore(tmp_path / "loom.db") as store:
        log = EventLog(store, live_sink=sent.append)
        async with log.subscribe() as events:
            log.publish_live(delta("s", "r", 1, "mine"))
            log.receive_live(delta("s", "r", 1, " and theirs"))
            got = [events.receive_nowait(), events.receive_nowait()]
    assert [getattr(e, "text", "") for e in got] == ["mine", " and theirs"]  # followers get both
    assert [getattr(e, "text", "") for e in sent] == ["mine"]
    live = log.live("s")
    assert live is not None and live.text == "mine and theirs"
