"""The face's handoff tools through a real MCP client: handoff_session, get_handoff, archive_memory, and refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clients.loom import FaceError, open_client
from orchestrator.context.handoff import BLOCKS
from tests.mcp_calls import call, error_of
from tests.orchestrator.face.test_face import face_client

pytestmark = pytest.mark.anyio

GOAL = "Count the files; answer in one line."


def model_spec(tmp_path: Path, *, delay_s: float = 0) -> str:
    blocks = dict.fromkeys(BLOCKS, "none")
    blocks["Goal and constraints"] = f'- "{GOAL}"'
    note = {"namespace": "session", "key": "count", "body": "there are 3 files"}
    turns = [
        {"text": "Noting.", "tool_calls": [{"name": "memory__set", "arguments": note}], "delay_s": delay_s},
        {"text": "Three files."},
        {"text": "Fresh: carrying on."},
    ]
    summary = "\n\n".join(f"## {name}\n{body}" for name, body in blocks.items())
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"turns": turns, "summaries": [{"text": summary}]}))
    return f"scripted:{path}"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_driver_hands_off_reads_the_handoff_and_continues_in_the_fresh_session(
    tmp_path: Path, mode: str
) -> None:
    async with face_client(tmp_path, mode) as client:
        session = await call(client, "create_session", cwd=str(tmp_path), model=model_spec(tmp_path), mode="bypass")
        sid = session["session_id"]
        run = await call(client, "send_message", session_id=sid, text=GOAL, wait_s=20)
        done = await call(client, "handoff_session", session_id=sid, instructions="Then list them.", trigger="goal")
        new_id = done["new_session_id"]
        by_new = await call(client, "get_handoff", session_id=new_id)
        by_old = await call(client, "get_handoff", session_id=sid)
        refused = await error_of(client, "send_message", session_id=sid, text="more")
        fresh = await call(client, "send_message", session_id=new_id, text="go on", wait_s=20)
        old = await call(client, "get_session", session_id=sid)
        again = await call(client, "archive_memory", session_id=sid)
    assert run["status"] == "completed" and fresh["final_text"] == "Fresh: carrying on."
    assert done["instructions"] == [GOAL] and done["extra"] == "Then list them." and done["trigger"] == "goal"
    assert done["memory"]["keys"] == ["count"] and done["memory"]["to_namespace"] == "project"
    assert by_new == by_old and by_new["text"] == done["text"] and by_new["session_id"] == sid
    assert f"was handed off to session '{new_id}'" in refused
    assert old["archived"] and old["status"] == "archived"
    assert again["keys"] == [] and again["unchanged"] == ["count"]


async def test_handoffs_are_refused_for_unknown_busy_and_archived_sessions(tmp_path: Path) -> None:
    async with face_client(tmp_path, "auto") as client:
        unknown = await error_of(client, "handoff_session", session_id="s_nope")
        no_handoff_for = await error_of(client, "get_handoff", session_id="s_nope")
        session = await call(
            client, "create_session", cwd=str(tmp_path), model=model_spec(tmp_path, delay_s=30), mode="bypass"
        )
        sid = session["session_id"]
        none_yet = await error_of(client, "get_handoff", session_id=sid)
        run = await call(client, "send_message", session_id=sid, text=GOAL)
        busy = await error_of(client, "handoff_session", session_id=sid)
        await call(client, "cancel_run", run_id=run["run_id"])
        await call(client, "archive_session", session_id=sid)
        archived = await error_of(client, "handoff_session", session_id=sid)
        too_long = await error_of(client, "handoff_session", session_id=sid, instructions="x" * 20_000)
    assert "no session 's_nope'" in unknown and "no session 's_nope'" in no_handoff_for
    assert f"session '{sid}' has no handoff" in none_yet
    assert "is busy" in busy and "is archived" in archived
    assert "instructions" in too_long


async def test_the_client_library_has_the_three_calls_typed(tmp_path: Path) -> None:
    spec = model_spec(tmp_path)
    async with open_client(tmp_path / "home", cwd=tmp_path) as loom:
        session = await loom.create_session(str(tmp_path), model=spec, mode="bypass")
        await loom.send_message(session.session_id, GOAL, wait_s=20)
        done = await loom.handoff_session(session.session_id, "Then list them.", trigger="goal")
        shown = await loom.get_handoff(done.new_session_id)
        archived = await loom.archive_memory(session.session_id)
        with pytest.raises(FaceError, match="already handed off"):
            await loom.handoff_session(session.session_id)
    assert done.trigger == "goal" and done.memory is not None and done.memory.keys == ["count"]
    assert shown.session_id == session.session_id and shown.extra == "Then list them."
    assert archived.session_id == session.session_id and archived.unchanged == ["count"]
