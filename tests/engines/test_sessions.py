"""Sessions on both engines: a message answered, the next one answered with the first in its history, the session
listed, and its events read from a cursor with no gap and no duplicate."""

from __future__ import annotations

from typing import Any

import pytest

from tests.engines.conftest import Engine
from tests.mcp_calls import call

pytestmark = pytest.mark.anyio


async def test_a_second_message_is_answered_with_the_first_in_its_history(engine_host: Engine) -> None:
    (engine_host.work / "notes.txt").write_text("alpha")
    model = engine_host.script(
        "history",
        [
            {"text": "Reading.", "tool_calls": [{"id": "r", "name": "fs__read", "arguments": {"path": "notes.txt"}}]},
            {"text": "First answer."},
            {"text": "Earlier the file said: {{result:r}}"},
        ],
    )
    async with engine_host.face() as face:
        sid = (await call(face.client, "create_session", cwd=str(engine_host.work), model=model, mode="ask"))[
            "session_id"
        ]
        first = await call(face.client, "send_message", session_id=sid, text="read the notes", wait_s=30)
        second = await call(face.client, "send_message", session_id=sid, text="what did it say?", wait_s=30)
        again = await call(face.client, "get_run", run_id=first["run_id"])
        sessions = (await call(face.client, "list_sessions"))["sessions"]
        info = await call(face.client, "get_session", session_id=sid)
    assert (first["status"], first["final_text"]) == ("completed", "First answer."), first
    assert again["status"] == "completed" and again["final_text"] == "First answer."
    # Turn 2 answers only a conversation holding both earlier answers, and it quotes the first run's tool result.
    assert second["status"] == "completed", second
    assert second["final_text"].startswith("Earlier the file said:") and "alpha" in second["final_text"], second
    (listed,) = [s for s in sessions if s["session_id"] == sid]
    assert listed["status"] == "idle" and listed["last_seq"] == info["last_seq"] > 0, listed


async def test_events_read_from_a_cursor_while_a_run_goes_on_have_no_gap_or_duplicate(engine_host: Engine) -> None:
    model = engine_host.script(
        "events",
        [
            {"text": "Listing.", "tool_calls": [{"name": "fs__list", "arguments": {}}], "delay_s": 0.3},
            {"text": "Looked twice.", "tool_calls": [{"name": "fs__list", "arguments": {}}], "delay_s": 0.3},
            {"text": "All listed.", "delay_s": 0.3},
        ],
    )
    async with engine_host.face() as face:
        sid = (await call(face.client, "create_session", cwd=str(engine_host.work), model=model, mode="ask"))[
            "session_id"
        ]
        run = await call(face.client, "send_message", session_id=sid, text="list", wait_s=0)
        seen: list[dict[str, Any]] = []
        cursor = 0
        for _ in range(200):  # pages of at most 3 events, each waiting for more while the run goes on
            page = await call(face.client, "read_events", session_id=sid, after_seq=cursor, wait_s=5, limit=3)
            seen += page["events"]
            cursor = page["next_after_seq"]
            if any(e["type"] == "run_finished" for e in page["events"]):
                break
        last_seq = (await call(face.client, "get_session", session_id=sid))["last_seq"]
        replay = await call(face.client, "read_events", session_id=sid, after_seq=0, limit=1000)
    seqs = [e["seq"] for e in seen]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))) and seqs[-1] == last_seq, seqs
    assert seen == [e for e in replay["events"] if e["seq"] >= seqs[0]]  # what was followed is what is stored
    mine = [e["type"] for e in seen if e.get("run_id") == run["run_id"]]
    assert mine.count("tool_call_finished") == 2 and mine[-1] == "run_finished", mine
    assert seen[-1]["status"] == "completed" and seen[-1]["final_text"] == "All listed."
