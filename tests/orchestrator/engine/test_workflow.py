"""A run on the DBOS engine: enqueued by a face, driven by a worker, over one Postgres database."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from orchestrator.config import LoomConfig
from orchestrator.engine.face import RemoteRuns, remote_runs
from orchestrator.engine.settings import EngineSettings
from orchestrator.engine.worker import Worker, serving
from orchestrator.events import Event, RunFinished
from orchestrator.models.scripted import ScriptedModel
from orchestrator.runtime.host import SessionHost
from orchestrator.runtime.runtime import Runtime
from orchestrator.store.checkpoints import CheckpointStore
from orchestrator.store.eventlog import EventLog

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


def _script(path: Path, turns: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"by_history": True, "turns": turns}))
    return path


@pytest.fixture
async def pool(fresh_database: str, tmp_path: Path) -> AsyncIterator[Pool]:
    settings = EngineSettings(kind="dbos", database=fresh_database)
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    async with serving(settings, home, LoomConfig(), worker_id="w1") as worker:
        async with CheckpointStore(fresh_database) as store:
            log = EventLog(store)
            async with SessionHost(Runtime(log, home=home)) as face, remote_runs(settings, log) as runs:
                yield Pool(face, runs, worker, work)


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
    ((rid, journal),) = pool.worker.finished
    assert rid == "r_one" and not journal.recovering and journal.replayed == 0
    assert journal.ran.count("model") == 2 and journal.ran.count("tool") == 1
