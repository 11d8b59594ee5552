"""An "approve for the session" decision is remembered with the session, across a restart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client

from orchestrator.embedded import embedded_runtime
from orchestrator.face import build_face
from orchestrator.host import SessionHost
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
