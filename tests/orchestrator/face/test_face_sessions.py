"""What list_sessions says about each session: its status (what it needs) and the title a person gave it."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from orchestrator.face.server import build_face
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.host import SessionHost
from tests.mcp_calls import call, error_of

pytestmark = pytest.mark.anyio


def script(path: Path, turns: Sequence[Mapping[str, Any]]) -> str:
    path.write_text(json.dumps({"turns": turns}))
    return f"scripted:{path}"


async def listed(client: Client) -> dict[str, dict[str, Any]]:
    return {s["session_id"]: s for s in (await call(client, "list_sessions"))["sessions"]}


async def test_each_session_says_whether_it_waits_for_a_person_failed_or_is_idle(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    writes = script(
        tmp_path / "w.json",
        [{"text": "w", "tool_calls": [{"name": "fs__write", "arguments": {"path": "a", "content": "A"}}]}, {}],
    )
    fails = script(tmp_path / "f.json", [{"error": "permanent:the provider said no"}])
    async with embedded_runtime(tmp_path / "home") as runtime, SessionHost(runtime) as host:
        async with Client(build_face(host)) as client:
            waiting = await call(client, "create_session", cwd=str(work), model=writes, mode="ask")
            failing = await call(client, "create_session", cwd=str(work), model=fails, mode="ask")
            quiet = await call(client, "create_session", cwd=str(work), model=fails, mode="ask")
            run = await call(client, "send_message", session_id=waiting["session_id"], text="go", wait_s=10)
            failed = await call(client, "send_message", session_id=failing["session_id"], text="go", wait_s=10)
            assert (run["status"], failed["status"]) == ("awaiting_approval", "failed")
            before = await listed(client)
            one = await call(client, "get_session", session_id=waiting["session_id"])
            await call(client, "decide_approval", approval_id=run["pending_approvals"][0], decision="approve_once")
            done = await call(client, "get_run", run_id=run["run_id"], wait_s=10)
            after = await listed(client)
    assert before[waiting["session_id"]]["status"] == one["status"] == "awaiting_approval"
    assert before[waiting["session_id"]]["state"] == "active"  # the old field keeps its meaning
    assert before[failing["session_id"]]["status"] == "failed"
    assert before[quiet["session_id"]]["status"] == "idle"
    assert done["status"] == "completed"
    assert after[waiting["session_id"]]["status"] == "idle"


async def test_a_title_is_one_clean_bounded_line_kept_across_restarts(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    model = script(tmp_path / "s.json", [{"text": "hi"}])
    hostile = "\x1b]0;owned\x07\x1b[2J fix\tthe\nbuild \u202eevil\x9b31m" + "x" * 200
    async with embedded_runtime(tmp_path / "home") as runtime, SessionHost(runtime) as host:
        async with Client(build_face(host)) as client:
            sid = (await call(client, "create_session", cwd=str(work), model=model))["session_id"]
            renamed = await call(client, "rename_session", session_id=sid, title=hostile)
            unknown = await error_of(client, "rename_session", session_id="s_nope", title="x")
            plain = await call(client, "rename_session", session_id=sid, title="  release notes  ")
    async with embedded_runtime(tmp_path / "home") as runtime, SessionHost(runtime) as host:
        async with Client(build_face(host)) as client:
            again = (await listed(client))[sid]
    title = renamed["title"]
    assert title.startswith("]0;owned[2J fix the build evil31mxxx") and title.endswith("…"), title
    assert len(title) == 80 and title.isprintable()
    assert "no session 's_nope'" in unknown
    assert plain["title"] == again["title"] == "release notes"
