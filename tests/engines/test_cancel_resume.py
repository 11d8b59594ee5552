"""Cancelling and resuming on both engines.

A run waiting for an approval, or in a slow model turn, is cancelled and ends ``cancelled``. A face's restart in the
middle of a run: the embedded engine's run is interrupted with the face and ``resume_run`` finishes it; a dbos
engine's run goes on in its worker, and ``resume_run`` says so instead of driving the run a second time.
"""

from __future__ import annotations

import anyio
import pytest

from tests.engines.conftest import Engine, Face
from tests.mcp_calls import call, error_of

pytestmark = pytest.mark.anyio


async def session(face: Face, engine: Engine, model: str, mode: str = "ask") -> str:
    created = await call(face.client, "create_session", cwd=str(engine.work), model=model, mode=mode)
    return str(created["session_id"])


async def until_event(face: Face, sid: str, kind: str, timeout_s: float = 30) -> None:
    """Wait (bounded) until the session has stored an event of type ``kind``."""
    cursor = 0
    with anyio.fail_after(timeout_s):
        while True:
            page = await call(face.client, "read_events", session_id=sid, after_seq=cursor, wait_s=2)
            if any(e["type"] == kind for e in page["events"]):
                return
            cursor = page["next_after_seq"]


async def test_a_run_waiting_for_an_approval_is_cancelled(engine_host: Engine) -> None:
    model = engine_host.script(
        "wait",
        [{"text": "W.", "tool_calls": [{"name": "fs__write", "arguments": {"path": "f.txt", "content": "x"}}]}, {}],
    )
    async with engine_host.face() as face:
        sid = await session(face, engine_host, model)
        run = await call(face.client, "send_message", session_id=sid, text="write f", wait_s=30)
        cancelled = await call(face.client, "cancel_run", run_id=run["run_id"])
        later = await call(face.client, "get_run", run_id=run["run_id"])
        left = (await call(face.client, "list_approvals", session_id=sid))["approvals"]
        late = await error_of(face.client, "decide_approval", approval_id=run["pending_approvals"][0], decision="deny")
    assert run["status"] == "awaiting_approval", run
    assert cancelled["status"] == later["status"] == "cancelled", (cancelled, later)
    assert left == [] and "not pending" in late
    assert not (engine_host.work / "f.txt").exists()


async def test_a_run_in_a_slow_model_turn_is_cancelled(engine_host: Engine) -> None:
    model = engine_host.script("slow", [{"text": "Too late.", "delay_s": 30}])
    async with engine_host.face() as face:
        sid = await session(face, engine_host, model)
        run = await call(face.client, "send_message", session_id=sid, text="think", wait_s=0)
        await until_event(face, sid, "user_message")  # the run has started and is in its model turn
        started = anyio.current_time()
        cancelled = await call(face.client, "cancel_run", run_id=run["run_id"])
        took = anyio.current_time() - started
        events = (await call(face.client, "read_events", session_id=sid, limit=1000))["events"]
    assert cancelled["status"] == "cancelled", cancelled
    assert took < 5, f"the cancel took {took:.1f} s"
    (ended,) = [e for e in events if e["type"] == "run_finished"]
    assert ended["status"] == "cancelled" and "assistant_message" not in [e["type"] for e in events]


async def test_a_face_restart_mid_run_then_resume_run(engine_host: Engine) -> None:
    model = engine_host.script(
        "restart",
        [
            {"text": "W.", "tool_calls": [{"name": "fs__write", "arguments": {"path": "g.txt", "content": "once"}}]},
            {"text": "Finished.", "delay_s": 3},
        ],
    )
    async with engine_host.face() as face:
        sid = await session(face, engine_host, model, mode="bypass")
        run_id = (await call(face.client, "send_message", session_id=sid, text="write g", wait_s=0))["run_id"]
        await until_event(face, sid, "tool_call_finished")  # in the slow second turn now
    async with engine_host.face() as face:
        after = await call(face.client, "get_run", run_id=run_id)
        if engine_host.kind == "embedded":
            assert after["status"] == "interrupted", after
            resumed = await call(face.client, "resume_run", run_id=run_id, wait_s=30)
        else:  # the worker goes on with the run: the face neither interrupts it nor drives it a second time
            assert after["status"] == "running", after  # the new face follows it (its approvals, its end)
            refused = await error_of(face.client, "resume_run", run_id=run_id)
            assert f"run {run_id!r} is in progress" in refused, refused
            resumed = await call(face.client, "get_run", run_id=run_id, wait_s=30)
        finished = await error_of(face.client, "resume_run", run_id=run_id)
        events = (await call(face.client, "read_events", session_id=sid, limit=1000))["events"]
    assert (resumed["status"], resumed["final_text"]) == ("completed", "Finished."), resumed
    assert f"run {run_id!r} is completed; only an interrupted run can be resumed" in finished
    assert [e["type"] for e in events].count("tool_call_started") == 1  # the write ran once, on either engine
    assert (engine_host.work / "g.txt").read_text() == "once"


async def test_an_approval_waiting_across_a_face_restart_is_answered_after_it(engine_host: Engine) -> None:
    model = engine_host.script(
        "ask",
        [
            {"text": "W.", "tool_calls": [{"name": "fs__write", "arguments": {"path": "h.txt", "content": "h"}}]},
            {"text": "Done."},
        ],
    )
    async with engine_host.face() as face:
        sid = await session(face, engine_host, model)
        run = await call(face.client, "send_message", session_id=sid, text="write h", wait_s=30)
    async with engine_host.face() as face:
        if engine_host.kind == "embedded":  # the restart interrupted it; resuming asks again
            await call(face.client, "resume_run", run_id=run["run_id"], wait_s=30)
        (waiting,) = (await call(face.client, "list_approvals", session_id=sid))["approvals"]
        await call(face.client, "decide_approval", approval_id=waiting["approval_id"], decision="approve_once")
        done = await call(face.client, "get_run", run_id=run["run_id"], wait_s=30)
    assert run["status"] == "awaiting_approval" and waiting["tool"] == "fs__write", (run, waiting)
    assert (done["status"], done["final_text"]) == ("completed", "Done."), done
    assert (engine_host.work / "h.txt").read_text() == "h"
