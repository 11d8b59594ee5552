"""An "approve for the session" decision is remembered with the session, across a restart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client

from orchestrator.face.server import build_face
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.host import SessionHost
from tests.mcp_calls import call

pytestmark = pytest.mark.anyio

TURNS = [
    {"text": "w", "tool_calls": [{"name": "fs__write", "arguments": {"path": "a.txt", "content": "a"}}]},
    {"text": "done"},
]


async def test_approve_session_survives_a_restart(tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"turns": TURNS}))
    home = tmp_path / "home"
    async with embedded_runtime(home) as runtime, SessionHost(runtime) as host, Client(build_face(host)) as client:
        session = await call(client, "create_session", cwd=str(tmp_path), model=f"scripted:{script}", mode="ask")
        sid = session["session_id"]
        first = await call(client, "send_message", session_id=sid, text="one", wait_s=10)
        assert first["status"] == "awaiting_approval"
        await call(client, "decide_approval", approval_id=first["pending_approvals"][0], decision="approve_session")
        assert (await call(client, "get_run", run_id=first["run_id"], wait_s=10))["status"] == "completed"
    # A new process (runtime and host) reopens the session from the store: no approval is asked again.
    async with embedded_runtime(home) as runtime, SessionHost(runtime) as host, Client(build_face(host)) as client:
        second = await call(client, "send_message", session_id=sid, text="two", wait_s=10)
        events = (await call(client, "read_events", session_id=sid))["events"]
    assert second["status"] == "completed", second
    assert [e["type"] for e in events].count("approval_requested") == 1


async def test_approve_session_never_covers_a_change_to_looms_own_config(tmp_path: Path) -> None:
    # A person approves fs__write for the session; the model then writes AGENTS.md and .loom/policy.toml.
    # Each of those is asked about again: approving a tool is not approving a change of Loom's permissions.
    work = tmp_path / "work"
    work.mkdir()
    turns = [
        {"tool_calls": [{"name": "fs__write", "arguments": {"path": "a.txt", "content": "a"}}]},
        {"tool_calls": [{"name": "fs__write", "arguments": {"path": "AGENTS.md", "content": "obey me"}}]},
        {"tool_calls": [{"name": "fs__write", "arguments": {"path": ".loom/policy.toml", "content": ""}}]},
        {"text": "done"},
    ]
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"turns": turns}))
    async with (
        embedded_runtime(tmp_path / "home") as runtime,
        SessionHost(runtime) as host,
        Client(build_face(host)) as client,
    ):
        session = await call(client, "create_session", cwd=str(work), model=f"scripted:{script}", mode="ask")
        run = await call(client, "send_message", session_id=session["session_id"], text="go", wait_s=10)
        await call(client, "decide_approval", approval_id=run["pending_approvals"][0], decision="approve_session")
        asked: list[str] = []
        for _ in range(2):
            waiting = await call(client, "get_run", run_id=run["run_id"], wait_s=10)
            assert waiting["status"] == "awaiting_approval", waiting
            (approval_id,) = waiting["pending_approvals"]
            pending = (await call(client, "list_approvals"))["approvals"]
            asked.append(pending[0]["reason"])
            await call(client, "decide_approval", approval_id=approval_id, decision="deny", reason="no")
        done = await call(client, "get_run", run_id=run["run_id"], wait_s=10)
    assert done["status"] == "completed", done
    assert all("Loom's own configuration" in reason for reason in asked), asked
    assert (work / "a.txt").read_text() == "a"
    assert not (work / "AGENTS.md").exists() and not (work / ".loom").exists()
