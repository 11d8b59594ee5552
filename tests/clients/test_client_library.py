"""The client library (``clients.loom``) drives a session the same way in-process and on a real daemon."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from clients.loom import FaceError, LoomClient, daemon_running, open_client
from orchestrator.events import AssistantMessage, Event, RunFinished, SessionCreated, TextDelta, ToolCallStarted
from orchestrator.face.local import CannotOpen, open_runtime
from tests.clients.cli_support import make_project, write_script
from tests.orchestrator.daemon.daemon_process import running_daemon

pytestmark = pytest.mark.anyio

STORY = " ".join(f"part{i}" for i in range(60))
TURNS: list[dict[str, Any]] = [
    {"text": "Looking.", "tool_calls": [{"name": "fs__read", "arguments": {"path": "README.md"}}]},
    {"text": STORY, "chunk_chars": 8, "chunk_delay_s": 0.01},
]


async def drive(loom: LoomClient, project: Path) -> tuple[list[Event], str]:
    """Create a session, send one message and follow it to the end: the events seen, and the run's answer."""
    session = await loom.create_session(str(project), model="scripted:script.json", mode="plan", headless=True)
    run = await loom.send_message(session.session_id, "tell me a story")
    seen: list[Event] = []
    with anyio.fail_after(30):
        async for event in loom.follow(session.session_id, every_message=True):
            seen.append(event)
            if isinstance(event, RunFinished) and event.run_id == run.run_id:
                break
    done = await loom.get_run(run.run_id)
    assert done.status == "completed", done
    return seen, done.final_text


def check(seen: list[Event], answer: str) -> None:
    """What a user of the library relies on: the stored events in order, and the text once, matching the store."""
    assert isinstance(seen[0], SessionCreated)
    assert any(isinstance(e, ToolCallStarted) and e.tool == "fs__read" for e in seen)
    messages = [e for e in seen if isinstance(e, AssistantMessage)]
    streamed = "".join(e.text for e in seen if isinstance(e, TextDelta))
    assert streamed == "".join(m.message.text for m in messages)  # nothing doubled, nothing missing
    assert messages[-1].message.text == answer == STORY
    stored = [e.seq for e in seen if e.seq is not None]
    assert stored == sorted(stored) and len(set(stored)) == len(stored)


async def test_in_process_the_library_runs_the_face_itself(tmp_path: Path) -> None:
    project, home = make_project(tmp_path / "p"), tmp_path / "home"
    write_script(project / "script.json", TURNS)

    async with open_client(home, cwd=project) as loom:
        assert not loom.on_daemon
        seen, answer = await drive(loom, project)
        listed = await loom.list_sessions()
        with pytest.raises(FaceError, match="no session 's_nope'"):
            await loom.get_session("s_nope")

    check(seen, answer)
    assert [s.cwd for s in listed] == [str(project)]
    async with open_client(home, cwd=project) as again:  # the session outlives the face that ran it
        assert [s.session_id for s in await again.list_sessions()] == [s.session_id for s in listed]


async def test_on_a_daemon_the_library_attaches_and_reads_the_same(tmp_path: Path) -> None:
    project, home = make_project(tmp_path / "p"), tmp_path / "home"
    write_script(project / "script.json", TURNS)

    with running_daemon(home, tmp_path):
        assert daemon_running(home)
        started = time.monotonic()
        async with open_client(home, cwd=project) as loom:
            assert loom.on_daemon
            seen, answer = await drive(loom, project)
        assert time.monotonic() - started < 30

    check(seen, answer)


async def test_an_in_process_face_refuses_a_home_another_face_holds(tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with open_runtime(home):
        with pytest.raises(CannotOpen) as refused:
            async with open_client(home, cwd=tmp_path):
                pass
    assert refused.value.usage and "loom serve" in str(refused.value)
