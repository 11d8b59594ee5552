"""Approvals on both engines: a write in mode ask waits for one; approve_once runs it, deny refuses it and the model
is told, approve_session lets the next same call run unasked (in that run and the session's next), a headless
session denies instead of asking, and a decided approval refuses a second answer."""

from __future__ import annotations

from typing import Any

import pytest

from tests.engines.conftest import Engine, Face
from tests.mcp_calls import call, error_of

pytestmark = pytest.mark.anyio


def write(path: str, content: str = "x") -> dict[str, Any]:
    """A scripted call of fs__write (id ``w``: a later turn of the run quotes its result)."""
    return {"id": "w", "name": "fs__write", "arguments": {"path": path, "content": content}}


async def session(face: Face, engine: Engine, model: str, **options: Any) -> str:
    created = await call(face.client, "create_session", cwd=str(engine.work), model=model, mode="ask", **options)
    return str(created["session_id"])


async def test_a_write_waits_for_approval_and_approve_once_runs_it(engine_host: Engine) -> None:
    model = engine_host.script("once", [{"text": "Writing.", "tool_calls": [write("b.txt")]}, {"text": "Written."}])
    async with engine_host.face() as face:
        sid = await session(face, engine_host, model)
        run = await call(face.client, "send_message", session_id=sid, text="write b", wait_s=30)
        (waiting,) = (await call(face.client, "list_approvals", session_id=sid))["approvals"]
        written_before = (engine_host.work / "b.txt").exists()
        decided = await call(
            face.client, "decide_approval", approval_id=waiting["approval_id"], decision="approve_once", decided_by="me"
        )
        again = await error_of(face.client, "decide_approval", approval_id=waiting["approval_id"], decision="deny")
        done = await call(face.client, "get_run", run_id=run["run_id"], wait_s=30)
        left = (await call(face.client, "list_approvals", session_id=sid))["approvals"]
    assert run["status"] == "awaiting_approval" and run["pending_approvals"] == [waiting["approval_id"]], run
    assert (waiting["tool"], waiting["arguments"]["path"], waiting["run_id"]) == ("fs__write", "b.txt", run["run_id"])
    assert not written_before
    assert decided["decision"] == "approve_once"
    assert "not pending" in again  # the first answer won
    assert (done["status"], done["final_text"]) == ("completed", "Written."), done
    assert (engine_host.work / "b.txt").read_text() == "x" and left == []


async def test_a_denied_write_is_refused_and_the_model_is_told_why(engine_host: Engine) -> None:
    model = engine_host.script(
        "deny", [{"text": "Writing.", "tool_calls": [write("c.txt")]}, {"text": "Refused: {{result:w}}"}]
    )
    async with engine_host.face() as face:
        sid = await session(face, engine_host, model)
        run = await call(face.client, "send_message", session_id=sid, text="write c", wait_s=30)
        (approval,) = run["pending_approvals"]
        await call(face.client, "decide_approval", approval_id=approval, decision="deny", reason="not in this repo")
        done = await call(face.client, "get_run", run_id=run["run_id"], wait_s=30)
    assert done["status"] == "completed" and "not in this repo" in done["final_text"], done
    assert not (engine_host.work / "c.txt").exists()


async def test_approve_session_lets_the_next_same_call_run_without_asking(engine_host: Engine) -> None:
    model = engine_host.script(
        "session",
        [
            {"text": "One.", "tool_calls": [write("d1.txt")]},
            {"text": "Two.", "tool_calls": [write("d2.txt")]},
            {"text": "Both."},
            {"text": "Three.", "tool_calls": [write("d3.txt")]},
            {"text": "Third."},
        ],
    )
    async with engine_host.face() as face:
        sid = await session(face, engine_host, model)
        run = await call(face.client, "send_message", session_id=sid, text="write two", wait_s=30)
        (approval,) = run["pending_approvals"]
        await call(face.client, "decide_approval", approval_id=approval, decision="approve_session")
        done = await call(face.client, "get_run", run_id=run["run_id"], wait_s=30)
        # The session's next run: the approval holds for the session, whichever process drives the run.
        later = await call(face.client, "send_message", session_id=sid, text="and a third", wait_s=30)
        events = (await call(face.client, "read_events", session_id=sid, limit=1000))["events"]
    assert (done["status"], done["final_text"]) == ("completed", "Both."), done
    assert (later["status"], later["final_text"]) == ("completed", "Third."), later
    assert [e["type"] for e in events].count("approval_requested") == 1
    assert all((engine_host.work / f"d{n}.txt").exists() for n in (1, 2, 3))


async def test_a_headless_session_denies_instead_of_asking(engine_host: Engine) -> None:
    model = engine_host.script(
        "headless", [{"text": "Writing.", "tool_calls": [write("e.txt")]}, {"text": "Told: {{result:w}}"}]
    )
    async with engine_host.face() as face:
        sid = await session(face, engine_host, model, headless=True)
        done = await call(face.client, "send_message", session_id=sid, text="write e", wait_s=30)
        events = (await call(face.client, "read_events", session_id=sid, limit=1000))["events"]
    assert done["status"] == "completed" and done["pending_approvals"] == [], done
    assert done["final_text"].startswith("Told:") and "{{result" not in done["final_text"], done
    assert "approval_requested" not in [e["type"] for e in events]
    assert not (engine_host.work / "e.txt").exists()
