"""Replays on the DBOS engine: one that takes another path than its journal stops with an error naming the step."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from orchestrator.config import load_config
from orchestrator.events import RunFinished
from orchestrator.models.scripted import ScriptedModel
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.host import SessionHost
from tests.orchestrator.engine.worker_process import spawn_worker

pytestmark = pytest.mark.anyio

ALLOW_WRITES = '[[rules]]\naction = "allow"\ntool = "fs__write"\n'


async def test_a_replay_that_decides_otherwise_than_its_journal_fails_the_run_naming_the_step(
    fresh_database: str, tmp_path: Path
) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir(mode=0o700)
    work.mkdir()
    engine = {"kind": "dbos", "database": fresh_database, "heartbeatS": 0.3, "takeoverAfterS": 1.5}
    (home / "config.json").write_text(json.dumps({"engine": engine}))
    script = tmp_path / "script.json"
    turns = [
        {"text": "Writing.", "tool_calls": [{"name": "fs__write", "arguments": {"path": "b.txt", "content": "x"}}]},
        {"text": "Done."},
    ]
    script.write_text(json.dumps({"by_history": True, "turns": turns}))
    first = spawn_worker("w0", home, work)
    second = None
    try:
        await first.joined()
        config = load_config(home, work)
        async with embedded_runtime(home, config=config) as runtime, SessionHost(runtime) as face:
            session = await face.create_session(work, ScriptedModel.from_file(script), mode="ask")
            handle = await face.start_run(session.id, "write b", 10)
            with anyio.fail_after(30):
                while True:
                    if face.pending(session_id=session.id):
                        break
                    await anyio.sleep(0.05)
            # The run waits on its approval; its worker dies; meanwhile a person allows such writes outright.
            first.sigkill()
            (home / "policy.toml").write_text(ALLOW_WRITES)
            second = spawn_worker("w1", home, work)
            await face.wait(handle.run_id, 60)
            view = await face.view(handle.run_id)
            assert view.status == "failed", view
            assert "replay diverged from its journal at step" in view.reason and "(journal)" in view.reason, view
            assert "start it again" in view.reason
            assert not (work / "b.txt").exists()  # the replay never ran the call its journal had not approved
            events = await runtime.log.store.read_events(session.id, run_id=handle.run_id)
            assert sum(isinstance(e, RunFinished) for e in events) == 1
            assert not face.pending(session_id=session.id)
    finally:
        first.kill_group()
        if second is not None:
            second.kill_group()
