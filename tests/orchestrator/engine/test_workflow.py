"""A run on the DBOS engine: enqueued by a face, driven by a worker, over one Postgres database."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from dbos import EnqueueOptions

from orchestrator.config import LoomConfig
from orchestrator.engine.face import RemoteRuns
from orchestrator.engine.settings import EngineSettings
from orchestrator.engine.worker import Worker, serving
from orchestrator.engine.workflow import QUEUE, WORKFLOW
from orchestrator.events import ApprovalDecided, Event, RunFinished, TextDelta
from orchestrator.models.scripted import ScriptedModel
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.host import HostError, SessionHost

pytestmark = pytest.mark.anyio


@dataclass
class Pool:
    """A face's host and its remote runs, and one worker, over one database."""

    face: SessionHost
    runs: RemoteRuns
    worker: Worker
    work: Path

    async def finished(self, session_id: str, run_id: str, timeout_s: float = 30) -> tuple[RunFinished, list[Event]]:
        with anyio.fail_after(timeout_s):
            while True:
                events = await self.face.runtime.log.store.read_events(session_id)
                ended = [e for e in events if isinstance(e, RunFinished) and e.run_id == run_id]
                if ended:
                    return ended[0], events
                await anyio.sleep(0.05)


async def _until(check: Callable[[], bool], timeout_s: float = 30) -> None:
    with anyio.fail_after(timeout_s):
        while True:
            if check():
                return
            await anyio.sleep(0.05)


def _script(path: Path, turns: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"by_history": True, "turns": turns}))
    return path


@pytest.fixture
async def pool(fresh_database: str, tmp_path: Path) -> AsyncIterator[Pool]:
    settings = EngineSettings(kind="dbos", database=fresh_database, heartbeat_s=0.5, takeover_after_s=3)
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    config = LoomConfig(engine=settings)
    async with serving(settings, home, config, worker_id="w1") as worker:
        # The face as `loom serve` opens it: the home's config chooses the engine.
        async with embedded_runtime(home, config=config) as runtime, SessionHost(runtime) as face:
            assert face.remote is not None
            yield Pool(face, face.remote, worker, work)


async def test_a_run_enqueued_by_the_face_is_driven_by_a_worker(pool: Pool, tmp_path: Path) -> None:
    script = _script(
        tmp_path / "script.json",
        [
            {
                "text": "Writing.",
                "tool_calls": [{"name": "fs__write", "arguments": {"path": "a.txt", "content": "hi"}}],
            },
            {"text": "Done."},
        ],
    )
    session = await pool.face.create_session(pool.work, ScriptedModel.from_file(script), mode="bypass")
    await pool.runs.enqueue(session.id, "r_one", "write a file", 10)
    ended, events = await pool.finished(session.id, "r_one")
    assert (ended.status, ended.final_text) == ("completed", "Done."), ended
    assert (pool.work / "a.txt").read_text() == "hi"
    kinds = [e.type for e in events if getattr(e, "run_id", "") == "r_one"]
    assert kinds[:3] == ["run_queued", "run_started", "user_message"], kinds
    assert kinds.count("tool_call_finished") == 1 and kinds[-1] == "run_finished"
    run = await pool.face.runtime.log.store.get_run("r_one")
    assert run is not None and run.owner == "worker:w1"
    await _until(lambda: bool(pool.worker.finished))  # the worker notes it once its run's end is stored
    ((rid, journal),) = pool.worker.finished
    assert rid == "r_one" and not journal.recovering and journal.replayed == 0
    assert journal.ran.count("model") == 2 and journal.ran.count("tool") == 1


async def test_an_approval_is_answered_on_the_face_and_the_worker_goes_on(pool: Pool, tmp_path: Path) -> None:
    script = _script(
        tmp_path / "script.json",
        [
            {"text": "Asking.", "tool_calls": [{"name": "fs__write", "arguments": {"path": "b.txt", "content": "x"}}]},
            {"text": "Written."},
        ],
    )
    session = await pool.face.create_session(pool.work, ScriptedModel.from_file(script), mode="ask")
    handle = await pool.face.start_run(session.id, "write b", 10)
    await _until(lambda: bool(pool.face.pending(session_id=session.id)))
    (waiting,) = pool.face.pending(session_id=session.id)
    assert waiting.tool == "fs__write" and waiting.run_id == handle.run_id
    assert not (pool.work / "b.txt").exists()
    assert (await pool.face.view(handle.run_id)).status == "awaiting_approval"
    await pool.face.decide(waiting.approval_id, "approve_once", "fine", "tester")
    with pytest.raises(HostError, match="not pending"):
        await pool.face.decide(waiting.approval_id, "deny", "", "someone else")  # the first answer won
    await pool.face.wait(handle.run_id, 30)
    view = await pool.face.view(handle.run_id)
    assert (view.status, view.final_text) == ("completed", "Written."), view
    assert (pool.work / "b.txt").read_text() == "x"
    events = await pool.face.runtime.log.store.read_events(session.id, run_id=handle.run_id)
    decided = [e for e in events if isinstance(e, ApprovalDecided)]
    assert [(d.approval_id, d.decision, d.decided_by) for d in decided] == [
        (waiting.approval_id, "approve_once", "tester")
    ]
    assert not pool.face.pending(session_id=session.id)


async def test_a_worker_never_takes_a_run_of_another_loop_version(pool: Pool, tmp_path: Path) -> None:
    script = _script(tmp_path / "script.json", [{"text": "Done."}])
    session = await pool.face.create_session(pool.work, ScriptedModel.from_file(script), mode="bypass")
    options: EnqueueOptions = {
        "workflow_name": WORKFLOW,
        "queue_name": QUEUE,
        "workflow_id": "r_old",
        "app_version": "loom-loop-0",  # started by older code, whose steps may come in another order
        "queue_partition_key": session.id,
    }
    await pool.runs.client.enqueue_async(options, "r_old", session.id, "hello", 10)
    await pool.runs.enqueue(session.id, "r_new", "hello", 10)
    ended, _ = await pool.finished(session.id, "r_new")
    assert ended.status == "completed"
    status = await (await pool.runs.client.retrieve_workflow_async("r_old")).get_status()
    assert status.status == "ENQUEUED" and await pool.face.runtime.log.store.get_run("r_old") is None


async def test_the_text_a_worker_streams_reaches_the_faces_followers_live(pool: Pool, tmp_path: Path) -> None:
    text = "Streaming this answer piece by piece, from the worker to the face. " * 3
    script = _script(tmp_path / "script.json", [{"text": text, "chunk_chars": 16, "chunk_delay_s": 0.02}])
    session = await pool.face.create_session(pool.work, ScriptedModel.from_file(script), mode="bypass")
    seen: list[str] = []
    async with pool.face.runtime.log.subscribe() as events:
        await pool.runs.enqueue(session.id, "r_live", "talk", 10)
        with anyio.fail_after(30):
            async for event in events:
                if isinstance(event, TextDelta) and event.session_id == session.id:
                    seen.append(event.text)
                    if "".join(seen) == text:
                        break
    ended, _ = await pool.finished(session.id, "r_live")
    assert ended.final_text == text and len(seen) > 3  # in pieces, as the worker streamed them


async def test_a_run_cancelled_before_a_worker_took_it_ends_cancelled(pool: Pool, tmp_path: Path) -> None:
    script = _script(tmp_path / "script.json", [{"text": "Thinking hard.", "delay_s": 3}, {"text": "Second."}])
    session = await pool.face.create_session(pool.work, ScriptedModel.from_file(script), mode="bypass")
    first = await pool.face.start_run(session.id, "one", 10)
    second = await pool.face.start_run(session.id, "two", 10)  # waits: one run of a session at a time
    await _until(lambda: first.status == "running")
    view = await pool.face.cancel(second.run_id)
    assert (view.status, view.reason) == ("cancelled", "cancelled before a worker took it"), view
    await pool.face.wait(first.run_id, 30)
    assert (await pool.face.view(first.run_id)).status == "completed"
    await anyio.sleep(1.0)  # a worker must not take the cancelled run after all
    events = await pool.face.runtime.log.store.read_events(session.id, run_id=second.run_id)
    assert [e.type for e in events] == ["run_queued", "run_finished"]
