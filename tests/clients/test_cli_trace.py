"""``loom trace RUN``: the timeline of a real run, as text and as JSONL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from clients.cli.trace import TraceEntry, build_timeline, collect
from clients.loom import LoomClient
from orchestrator.events import RunFinished
from orchestrator.face.server import build_face
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.host import SessionHost
from tests.clients.cli_support import run_loom, write_script

TURNS: list[dict[str, Any]] = [
    {
        "text": "looking",
        "tool_calls": [
            {"id": "ls", "name": "fs__list", "arguments": {"path": "."}},
            {"id": "sh", "name": "shell__run", "arguments": {"command": "echo hi"}},
        ],
    },
    {
        "text": "writing",
        "tool_calls": [{"id": "w", "name": "fs__write", "arguments": {"path": "a.txt", "content": "a"}}],
    },
    {"text": "done"},
]


def test_trace_prints_model_calls_tool_calls_with_durations_and_the_end(tmp_path: Path) -> None:
    script = write_script(tmp_path / "s.json", TURNS)
    home = tmp_path / "home"
    ran = run_loom("run", "--json", "--model", f"scripted:{script}", "go", cwd=tmp_path, home=home)
    assert ran.returncode == 0, ran
    finished = ran.events()[-1]
    assert isinstance(finished, RunFinished)
    run_id = finished.run_id

    text = run_loom("trace", run_id, cwd=tmp_path, home=home)
    jsonl = run_loom("trace", run_id, "--jsonl", cwd=tmp_path, home=home)
    unknown = run_loom("trace", "r_nosuchrun", cwd=tmp_path, home=home)

    assert text.returncode == 0, text
    assert text.stdout.startswith(f"run {run_id}  session s_") and "status completed" in text.stdout.splitlines()[0]
    entries = [TraceEntry.model_validate_json(line) for line in jsonl.stdout.splitlines()]
    kinds = [e.kind for e in entries]
    assert kinds[0] == "run" and entries[0].status == "started"
    assert kinds[-1] == "run" and entries[-1].status == "completed"
    assert [e.step for e in entries if e.kind == "model_call"] == [1, 2, 3]
    tools = {e.name: e for e in entries if e.kind == "tool_call"}
    assert tools["fs__list"].status == "ok" and tools["fs__write"].status == "ok"
    assert tools["shell__run"].status == "denied" and "headless" in tools["shell__run"].detail
    assert all(e.duration_ms is not None and e.duration_ms >= 0 for e in entries if e.kind == "model_call")
    assert tools["fs__write"].duration_ms is not None and tools["fs__write"].duration_ms > 0
    assert [e.at_s for e in entries] == sorted(e.at_s for e in entries)
    # The text form has one line per entry after the header, the tool lines naming their tool.
    assert len(text.stdout.splitlines()) == len(entries) + 1
    assert any("fs__write" in line and " ms " in line for line in text.stdout.splitlines())
    assert unknown.returncode == 2 and "r_nosuchrun" in unknown.stderr, unknown


@pytest.mark.anyio
async def test_an_approval_shows_who_decided_and_how_long_it_waited(tmp_path: Path) -> None:
    script = write_script(tmp_path / "s.json", TURNS[1:])
    async with embedded_runtime(tmp_path / "home") as runtime, SessionHost(runtime) as host:
        async with Client(build_face(host)) as client:
            created = await client.call_tool(
                "create_session", {"cwd": str(tmp_path), "model": f"scripted:{script}", "mode": "ask"}
            )
            sid = (created.structured_content or {})["session_id"]
            sent = await client.call_tool("send_message", {"session_id": sid, "text": "go", "wait_s": 10})
            run = sent.structured_content or {}
            assert run["status"] == "awaiting_approval", run
            await anyio.sleep(0.2)  # a person taking a moment
            await client.call_tool(
                "decide_approval",
                {"approval_id": run["pending_approvals"][0], "decision": "approve_once", "decided_by": "alice"},
            )
            await client.call_tool("get_run", {"run_id": run["run_id"], "wait_s": 10})
            record, events = await collect(LoomClient(client, on_daemon=False), run["run_id"])
    entries = build_timeline(events, record["run_id"])
    (approval,) = [e for e in entries if e.kind == "approval"]
    assert approval.name == "fs__write" and approval.status == "approve_once" and "alice" in approval.detail
    assert approval.duration_ms is not None and approval.duration_ms >= 200
    (write,) = [e for e in entries if e.kind == "tool_call"]
    assert write.at_s >= approval.at_s + 0.2  # the call started after the decision
    assert json.loads(write.detail) == {"path": "a.txt", "content": "a"}
