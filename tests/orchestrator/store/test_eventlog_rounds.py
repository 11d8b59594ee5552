"""Batches appended at once are stored together: fewer store calls, each caller still answered for its own batch."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest

from orchestrator.events import Event, Notice, SessionCreated
from orchestrator.store.checkpoints import CheckpointStore
from orchestrator.store.eventlog import EventLog
from orchestrator.store.interface import StoreError

pytestmark = pytest.mark.anyio

SESSIONS = 30


class RefusingStore(CheckpointStore):
    """The real checkpoint store, refusing any batch with an event of ``refused`` (as a full disk refuses all)."""

    def __init__(self, path: Path, refused: str = "") -> None:
        super().__init__(path)
        self.refused = refused
        self.appends: list[int] = []
        """The size of each batch the store was asked to append."""

    async def append(self, events: Sequence[Event]) -> None:
        """Refuse, or store as the real store does."""
        self.appends.append(len(events))
        if any(e.session_id == self.refused for e in events):
            raise StoreError(f"session {self.refused} refused")
        await super().append(events)


async def test_concurrent_appends_are_stored_in_fewer_calls_each_in_order(tmp_path: Path) -> None:
    async with RefusingStore(tmp_path / "loom.db") as store:
        log = EventLog(store)
        sids = [f"s{i}" for i in range(SESSIONS)]
        await log.append(*(SessionCreated(session_id=s, cwd="/", model="m") for s in sids))
        store.appends.clear()
        returned: dict[str, list[int]] = {}

        async def write(sid: str) -> None:
            for n in range(3):
                batch = [Notice(session_id=sid, text=f"{sid} {n} {k}") for k in range(2)]
                await log.append(*batch)
                # Back from append: the caller's own events are stored, numbered and in the log's memory.
                assert all(e.seq is not None for e in batch)
                assert log.stored_since(sid, (batch[0].seq or 0) - 1, 10) == batch
                returned.setdefault(sid, []).extend(e.seq or 0 for e in batch)

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for sid in sids:
                    tg.start_soon(write, sid)
        assert len(store.appends) < SESSIONS * 3  # rounds took several sessions' batches at once
        assert sum(store.appends) == SESSIONS * 6
        for sid in sids:
            stored = await store.read_events(sid)
            assert [e.seq for e in stored] == list(range(1, 8))
            assert returned[sid] == list(range(2, 8))
            assert [getattr(e, "text", "") for e in stored[1:]] == [
                f"{sid} {n} {k}" for n in range(3) for k in range(2)
            ]


async def test_a_batch_the_store_refuses_fails_only_its_own_caller(tmp_path: Path) -> None:
    async with RefusingStore(tmp_path / "loom.db", refused="bad") as store:
        log = EventLog(store)
        await log.append(*(SessionCreated(session_id=s, cwd="/", model="m") for s in ("a", "b", "c")))
        outcomes: dict[str, str] = {}

        async def write(sid: str) -> None:
            try:
                await log.append(Notice(session_id=sid, text=f"for {sid}"))
            except StoreError as exc:
                outcomes[sid] = f"failed: {exc}"
            else:
                outcomes[sid] = "stored"

        async with log.subscribe() as published:
            with anyio.fail_after(30):
                async with anyio.create_task_group() as tg:
                    for sid in ("a", "bad", "b", "c"):
                        tg.start_soon(write, sid)
            seen = []
            while True:
                try:
                    seen.append(published.receive_nowait())
                except anyio.WouldBlock:
                    break
        assert outcomes == {"a": "stored", "b": "stored", "c": "stored", "bad": "failed: session bad refused"}
        assert sorted(e.session_id for e in seen) == ["a", "b", "c"]  # nothing of the refused batch was published
        for sid in ("a", "b", "c"):
            assert [getattr(e, "text", "") for e in await store.read_events(sid, after_seq=1)] == [f"for {sid}"]
        assert log.stored_since("bad", 0, 10) is None  # memory vouches for nothing of the refused session
