"""An open session keeps its history in memory; reopened from the store, it rebuilds the very same history.

Real parts: the checkpoints store on SQLite (counted by a subclass that forwards every read), the fs server
reading a real file, and a function model that answers from what it is shown (a tool call for each new
message, an answer once the result is in, summaries for compactions).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from orchestrator.context.history import rebuild_history, user_turn
from orchestrator.events import ContextCompacted, Event, RunFinished
from orchestrator.messages import Message, ToolResultBlock
from orchestrator.models.base import ModelRequest
from orchestrator.models.scripted import FunctionModel, write_summary
from orchestrator.runtime.host import SessionHost
from orchestrator.runtime.runtime import Runtime
from orchestrator.store.checkpoints import CheckpointStore
from orchestrator.store.eventlog import EventLog

pytestmark = pytest.mark.anyio

LINE = "the quick brown fox jumps over the lazy dog, line {:03d}\n"


class CountingStore(CheckpointStore):
    """The SQLite store, counting the reads a session could make of its own history."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.reads: list[str] = []

    async def read_events(
        self,
        session_id: str,
        *,
        after_seq: int = 0,
        run_id: str | None = None,
        limit: int | None = None,
        before_seq: int | None = None,
    ) -> list[Event]:
        self.reads.append("read_events")
        return await super().read_events(
            session_id, after_seq=after_seq, run_id=run_id, limit=limit, before_seq=before_seq
        )

    async def read_context_events(self, session_id: str) -> list[Event]:
        self.reads.append("read_context_events")
        return await super().read_context_events(session_id)


class Reader:
    """A model that reads ``big.txt`` for every new message and answers once the result is in."""

    def __init__(self) -> None:
        self.slow_started = anyio.Event()
        self.sent: list[list[Message]] = []
        """The messages of each conversation request, as they were when sent."""

    def __call__(self, request: ModelRequest) -> dict[str, Any]:
        if request.purpose == "summary":
            return {"text": write_summary(request)}
        self.sent.append(list(request.messages))
        last = request.messages[-1]
        if any(isinstance(b, ToolResultBlock) for b in last.content):
            return {"text": f"Read it ({len(request.messages)} messages so far)."}
        if "slow" in last.text:
            self.slow_started.set()
            return {"delay_s": 60}
        if "broken" in last.text:
            return {"error": "permanent:the model is down"}
        return {"text": "Reading.", "tool_calls": [{"name": "fs__read", "arguments": {"path": "big.txt"}}]}


@contextlib.asynccontextmanager
async def runtime_on(home: Path) -> AsyncIterator[tuple[Runtime, CountingStore]]:
    async with CountingStore(home / "loom.db") as store:
        yield Runtime(EventLog(store), home=home), store


def workspace(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    (work / "big.txt").write_text("".join(LINE.format(i) for i in range(70)))  # ~1,000 tokens
    (tmp_path / "home").mkdir()
    return work


async def test_runs_on_an_open_session_read_nothing_back_from_the_store(tmp_path: Path) -> None:
    work = workspace(tmp_path)
    async with runtime_on(tmp_path / "home") as (runtime, store):
        async with runtime.open_session(work, FunctionModel(Reader())) as session:
            store.reads.clear()
            for i in range(10):
                assert (await session.run(f"read it, round {i}")).status == "completed"
            assert store.reads == []
            assert len(session.history) == 40
            assert session.history == rebuild_history(await store.read_context_events(session.id))


async def test_an_open_session_and_a_reopened_one_have_the_same_history(tmp_path: Path) -> None:
    """Twenty sends through compactions (automatic and on request), a cancel, a model failure and max_steps."""
    work = workspace(tmp_path)
    reader = Reader()
    async with runtime_on(tmp_path / "home") as (runtime, store):
        async with runtime.open_session(work, FunctionModel(reader, context_window=8000)) as session:
            for i in range(20):
                if i == 6:
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(session.run, "be slow")
                        with anyio.fail_after(10):
                            await reader.slow_started.wait()
                        tg.cancel_scope.cancel()
                    continue
                if i == 10:
                    assert (await session.compact()).status == "compacted"
                text = "this one is broken" if i == 12 else f"read it, round {i}"
                result = await session.run(text, max_steps=1 if i == 15 else 50)
                expected = {12: "failed", 15: "failed"}.get(i, "completed")
                assert result.status == expected, result
                assert session.history == rebuild_history(await store.read_context_events(session.id)), i
            held = list(session.history)
            events = await store.read_events(session.id)

    statuses = [e.status for e in events if isinstance(e, RunFinished)]
    assert statuses.count("cancelled") == 1 and statuses.count("failed") == 2
    compactions = [e for e in events if isinstance(e, ContextCompacted)]
    assert {c.trigger for c in compactions} == {"auto", "manual"}

    reopened_reader = Reader()
    async with runtime_on(tmp_path / "home") as (runtime, store):
        model = FunctionModel(reopened_reader, context_window=8000)
        async with runtime.open_session(work, model, session_id=session.id) as again:
            assert len(again.history) == len(held)
            for mine, theirs in zip(held, again.history, strict=True):
                assert mine == theirs
            # What the next run sends the model is the same on both paths: the held history, then the message.
            assert (await again.run("one more")).status == "completed"
    assert reopened_reader.sent[0] == [*held, user_turn("one more")]


async def test_after_a_rewind_the_session_and_its_branch_agree_with_the_store(tmp_path: Path) -> None:
    work = workspace(tmp_path)
    reader = Reader()

    def resolve(spec: str, cwd: Path) -> FunctionModel:
        return FunctionModel(reader)

    async with runtime_on(tmp_path / "home") as (runtime, store), SessionHost(runtime, resolve) as host:
        session = await host.create_session(work, FunctionModel(reader), "bypass")
        runs = []
        for i in range(4):
            handle = await host.start_run(session.id, f"read it, round {i}", 50)
            with anyio.fail_after(20):
                await handle.done.wait()
            runs.append(handle.run_id)
        before_third = list(session.history[:8])
        done = await host.rewind(session.id, runs[2])
        handle = await host.start_run(session.id, "and once more", 50)
        with anyio.fail_after(20):
            await handle.done.wait()
        assert session.history == rebuild_history(await store.read_context_events(session.id))
        branch = await host.session(done.session_id)
        assert branch.history == before_third
        handle = await host.start_run(branch.id, "on the branch", 50)
        with anyio.fail_after(20):
            await handle.done.wait()
        assert branch.history == rebuild_history(await store.read_context_events(branch.id))
        assert branch.history[:8] == before_third and len(branch.history) == 12
