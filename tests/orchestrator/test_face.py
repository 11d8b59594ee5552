"""The MCP face driven by the real MCP client, in-process, in both protocol eras."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from orchestrator.embedded import embedded_runtime
from orchestrator.face import build_face
from orchestrator.host import SessionHost

pytestmark = pytest.mark.anyio

MODES = ["auto", "legacy"]


@contextlib.asynccontextmanager
async def face_client(tmp_path: Path, mode: str) -> AsyncIterator[Client]:
    async with embedded_runtime(tmp_path / "home") as runtime, SessionHost(runtime) as host:
        async with Client(build_face(host), mode=mode) as client:
            yield client


def script(tmp_path: Path, turns: list[dict[str, Any]]) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"turns": turns}))
    return f"scripted:{path}"


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    content: dict[str, Any] | None = result.structured_content
    assert content is not None
    return content


@pytest.mark.parametrize("mode", MODES)
async def test_a_driver_runs_a_session_and_follows_its_events(tmp_path: Path, mode: str) -> None:
    (tmp_path / "work").mkdir()
    model = script(
        tmp_path,
        [
            {"text": "writing", "tool_calls": [{"name": "fs__write", "arguments": {"path": "a.txt", "content": "A"}}]},
            {"text": "wrote a.txt"},
        ],
    )
    async with face_client(tmp_path, mode) as client:
        session = await call(client, "create_session", cwd=str(tmp_path / "work"), model=model)
        run = await call(client, "send_message", session_id=session["session_id"], text="go", wait_s=10)
        page = await call(client, "read_events", session_id=session["session_id"])
        more = await call(client, "read_events", session_id=session["session_id"], after_seq=page["next_after_seq"])
    assert (run["status"], run["final_text"]) == ("completed", "wrote a.txt")
    assert (tmp_path / "work" / "a.txt").read_text() == "A"
    seqs = [e["seq"] for e in page["events"]]
    assert seqs == list(range(1, len(seqs) + 1)) and page["events"][-1]["type"] == "run_finished"
    assert more["events"] == [] and more["next_after_seq"] == page["next_after_seq"]


@pytest.mark.parametrize("mode", MODES)
async def test_send_returns_at_once_and_a_run_can_be_cancelled(tmp_path: Path, mode: str) -> None:
    model = script(tmp_path, [{"text": "slow", "delay_s": 30}])
    async with face_client(tmp_path, mode) as client:
        session = await call(client, "create_session", cwd=str(tmp_path), model=model)
        run = await call(client, "send_message", session_id=session["session_id"], text="go")
        assert run["status"] == "running"
        cancelled = await call(client, "cancel_run", run_id=run["run_id"])
        page = await call(client, "read_events", session_id=session["session_id"], wait_s=1)
    assert cancelled["status"] == "cancelled"
    assert page["events"][-1]["type"] == "run_finished" and page["events"][-1]["status"] == "cancelled"


async def test_unknown_ids_and_bad_directories_are_clear_errors(tmp_path: Path) -> None:
    async with face_client(tmp_path, "auto") as client:
        bad_run = await client.call_tool("get_run", {"run_id": "r_nope"})
        bad_session = await client.call_tool("send_message", {"session_id": "s_nope", "text": "hi"})
        bad_cwd = await client.call_tool("create_session", {"cwd": str(tmp_path / "missing"), "model": "scripted:demo"})
    assert bad_run.is_error and "no run 'r_nope'" in bad_run.content[0].text  # type: ignore[union-attr]
    assert bad_session.is_error and "create_session" in bad_session.content[0].text  # type: ignore[union-attr]
    assert bad_cwd.is_error and "not a directory" in bad_cwd.content[0].text  # type: ignore[union-attr]
