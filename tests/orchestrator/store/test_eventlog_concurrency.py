"""Many sessions written at once, each followed: every follower gets its log, nothing lost, doubled or reordered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from orchestrator.events import EVENT_ADAPTER, Event, RunFinished, SessionCreated
from orchestrator.face.live import read_page
from orchestrator.models.scripted import ScriptedModel
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.store.eventlog import TAIL_EVENTS, EventLog
from tests.orchestrator.store._eventlog_support import CountingStore, run_end, run_start, step

pytestmark = pytest.mark.anyio

SESSIONS = 20
STEPS = 40
"""Four events a step: each session writes more than the log keeps in memory."""


def wire(events: list[Event]) -> list[object]:
    return [EVENT_ADAPTER.dump_python(e, mode="json") for e in events]


async def follow(log: EventLog, session_id: str, after: int, limit: int, into: list[Event]) -> None:
    """Long-poll the session from ``after`` until its run has finished, keeping every event in order."""
    cursor, live = after, ""
    while not any(isinstance(e, RunFinished) for e in into):
        page = await read_page(log, session_id, cursor, 5, limit, live)
        into.extend(page.events)
        cursor, live = page.next_after_seq, page.live.cursor if page.live is not None else ""


async def test_concurrent_appends_to_many_sessions_reach_every_follower_exactly_once_in_order(tmp_path: Path) -> None:
    async with CountingStore(tmp_path / "loom.db") as store:
        log = EventLog(store)
        sessions = [f"s{i:02d}" for i in range(SESSIONS)]
        followed: dict[tuple[str, str], list[Event]] = {}

        async def write(sid: str) -> None:
            await log.append(SessionCreated(session_id=sid, cwd="/", model="scripted:x"), *run_start(sid, "r"))
            for n in range(1, STEPS + 1):
                for batch in step(sid, "r", n):
                    await log.append(*batch)  # the writers interleave: each append waits for the store
            await log.append(*run_end(sid, "r", STEPS))

        async def late(sid: str) -> None:
            # Joins once the session's start has left memory: its first pages come from the store, then memory.
            while (log.last_seq(sid) or 0) < TAIL_EVENTS + 20:
                await log.wait_stored(sid, 5)
            await follow(log, sid, 0, 50, followed[(sid, "late")])

        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                for sid in sessions:
                    for who in ("live", "paged", "late"):
                        followed[(sid, who)] = []
                    tg.start_soon(follow, log, sid, 0, 200, followed[(sid, "live")])
                    tg.start_soon(follow, log, sid, 0, 3, followed[(sid, "paged")])
                    tg.start_soon(late, sid)
                await anyio.wait_all_tasks_blocked()
                for sid in sessions:
                    tg.start_soon(write, sid)
        for sid in sessions:
            stored = await store.read_events(sid)
            assert [e.seq for e in stored] == list(range(1, 4 * STEPS + 5))
            for who in ("live", "paged", "late"):
                assert wire(followed[(sid, who)]) == wire(stored), (sid, who)
            # The late follower read the start of the log from the store (a few pages); the rest came from memory,
            # where reading the store at each wake-up would be some 300 reads (three followers, 80 batches).
            assert 1 <= store.reads[sid] <= 8


async def test_followers_of_real_concurrent_runs_get_what_the_store_has(tmp_path: Path) -> None:
    cwd = tmp_path / "work"
    cwd.mkdir()
    (cwd / "a.txt").write_text("alpha\n")
    turns: list[dict[str, Any]] = [
        {"text": "Looking.", "tool_calls": [{"name": "fs__list", "arguments": {}}]},
        {"text": "Reading.", "tool_calls": [{"name": "fs__read", "arguments": {"path": "a.txt"}}]},
        {"text": "It says alpha, in pieces.", "chunk_chars": 4},
    ]
    async with embedded_runtime(tmp_path / "home") as runtime:
        log = runtime.log
        followed: dict[str, list[Event]] = {}

        async def run_one(i: int) -> None:
            async with runtime.open_session(cwd, ScriptedModel.from_turns(turns)) as session:
                followed[session.id] = []
                async with anyio.create_task_group() as tg:
                    tg.start_soon(follow, log, session.id, 0, 200, followed[session.id])
                    result = await session.run(f"Look around ({i}).")
                    assert result.status == "completed"

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                for i in range(5):
                    tg.start_soon(run_one, i)
        for sid, events in followed.items():
            stored = await log.store.read_events(sid)
            assert any(isinstance(e, RunFinished) for e in stored)
            assert wire(events) == wire(stored), sid
