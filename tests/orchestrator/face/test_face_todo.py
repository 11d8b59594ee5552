"""The plan through the face: get_session's todos for an open session and after a restart, the todo_updated event
on the session's stream, and a child's plan that is its own."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from orchestrator.events_long import TodoItem, TodoUpdated
from orchestrator.face.server import build_face
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.host import SessionHost
from tests.mcp_calls import call

pytestmark = pytest.mark.anyio

PLAN = [
    {"text": "Read the failing test", "status": "completed"},
    {"text": "Fix the parser", "status": "in_progress"},
    {"text": "Run the suite", "status": "pending"},
]


def script(path: Path, turns: Sequence[Mapping[str, Any]]) -> str:
    path.write_text(json.dumps({"turns": turns}))
    return f"scripted:{path}"


def todo(**arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": "loom__todo", "arguments": arguments}]}


async def test_get_session_shows_the_plan_of_an_open_session_and_after_a_restart(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    model = script(
        tmp_path / "m.json", [todo(items=PLAN), todo(marks=[{"item": 2, "status": "completed"}]), {"text": "done"}]
    )
    home = tmp_path / "home"
    async with embedded_runtime(home) as runtime, SessionHost(runtime) as host:
        async with Client(build_face(host)) as client:
            sid = (await call(client, "create_session", cwd=str(work), model=model, mode="ask"))["session_id"]
            before = await call(client, "get_session", session_id=sid)
            run = await call(client, "send_message", session_id=sid, text="fix it", wait_s=10)
            live = await call(client, "get_session", session_id=sid)
            page = await call(client, "read_events", session_id=sid)
            listed = await call(client, "list_sessions")
    async with embedded_runtime(home) as runtime, SessionHost(runtime) as host:
        async with Client(build_face(host)) as client:
            restarted = await call(client, "get_session", session_id=sid)
            assert sid not in host.sessions  # read back from the store, not from a session reopened for it
            # Written while closed here (another process, say): the next get_session reads it again.
            await runtime.log.append(TodoUpdated(session_id=sid, items=[TodoItem(text="elsewhere")]))
            changed = await call(client, "get_session", session_id=sid)
    assert before["todos"] == []
    assert run["status"] == "completed"
    marked = [PLAN[0], {**PLAN[1], "status": "completed"}, PLAN[2]]
    assert live["todos"] == restarted["todos"] == marked
    updates = [e for e in page["events"] if e["type"] == "todo_updated"]
    assert [u["items"] for u in updates] == [PLAN, marked]
    assert all(u["run_id"] == run["run_id"] and u["carried"] is False for u in updates)
    assert changed["todos"] == [{"text": "elsewhere", "status": "pending"}]
    assert listed["sessions"][0]["todos"] == []  # listing stays cheap: get_session gives the plan


async def test_a_childs_plan_is_its_own_even_in_plan_mode(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    parent_model = script(tmp_path / "p.json", [todo(items=PLAN), {"text": "planned"}])
    child_plan = [{"text": "Look at the parser only", "status": "in_progress"}]
    child_model = script(tmp_path / "c.json", [todo(items=child_plan), {"text": "looked"}])
    async with embedded_runtime(tmp_path / "home") as runtime, SessionHost(runtime) as host:
        async with Client(build_face(host)) as client:
            parent = await call(client, "create_session", cwd=str(work), model=parent_model, mode="plan")
            pid = parent["session_id"]
            ran = await call(client, "send_message", session_id=pid, text="plan", wait_s=10)
            child = await call(client, "create_session", cwd="", model=child_model, parent_session_id=pid)
            cid = child["session_id"]
            child_run = await call(client, "send_message", session_id=cid, text="look", wait_s=10)
            parent_after = await call(client, "get_session", session_id=pid)
            child_after = await call(client, "get_session", session_id=cid)
    assert (ran["status"], child_run["status"], child["mode"]) == ("completed", "completed", "plan")
    assert parent_after["todos"] == PLAN
    assert child_after["todos"] == child_plan


async def test_a_rewound_branch_starts_with_the_plan_as_it_stood_before_the_rewind_point(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    later = [{"text": "Something done after the checkpoint", "status": "completed"}]
    model = script(tmp_path / "m.json", [todo(items=PLAN), {"text": "planned"}, todo(items=later), {"text": "redone"}])
    async with embedded_runtime(tmp_path / "home") as runtime, SessionHost(runtime) as host:
        async with Client(build_face(host)) as client:
            sid = (await call(client, "create_session", cwd=str(work), model=model))["session_id"]
            await call(client, "send_message", session_id=sid, text="plan", wait_s=10)
            second = await call(client, "send_message", session_id=sid, text="replan", wait_s=10)
            rewound = await call(client, "rewind_session", session_id=sid, to_run_id=second["run_id"])
            branch = await call(client, "get_session", session_id=rewound["session_id"])
            original = await call(client, "get_session", session_id=sid)
    assert branch["todos"] == PLAN
    assert original["todos"] == later
