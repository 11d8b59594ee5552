"""Approvals and cancel through the daemon over streamable HTTP, with two real MCP clients, both eras."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.clients.cli_support import write_script
from tests.orchestrator.daemon.daemon_process import Daemon, call, mcp_client, running_daemon

pytestmark = pytest.mark.anyio

TURNS: list[dict[str, Any]] = [
    {"text": "writing", "tool_calls": [{"name": "fs__write", "arguments": {"path": "x.txt", "content": "x"}}]},
    {"text": "done"},
    {"text": "slow", "delay_s": 30},
]


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("approvals")
    with running_daemon(root / "home", root) as running:
        yield running


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_second_client_answers_an_approval_then_a_run_is_cancelled(
    daemon: Daemon, tmp_path: Path, mode: str
) -> None:
    script = write_script(tmp_path / "s.json", TURNS)
    async with mcp_client(daemon, mode) as driver, mcp_client(daemon, mode) as reviewer:
        session = await call(driver, "create_session", cwd=str(tmp_path), model=f"scripted:{script}", mode="ask")
        sid = session["session_id"]
        run = await call(driver, "send_message", session_id=sid, text="write", wait_s=10)
        assert run["status"] == "awaiting_approval", run
        listed = await call(reviewer, "list_approvals", session_id=sid)
        (approval,) = listed["approvals"]
        await call(reviewer, "decide_approval", approval_id=approval["approval_id"], decision="approve_once")
        finished = await call(driver, "get_run", run_id=run["run_id"], wait_s=20)
        slow = await call(driver, "send_message", session_id=sid, text="think")
        cancelled = await call(reviewer, "cancel_run", run_id=slow["run_id"])
        seen_by_driver = await call(driver, "read_events", session_id=sid)
        seen_by_reviewer = await call(reviewer, "read_events", session_id=sid)
    assert finished["status"] == "completed" and (tmp_path / "x.txt").read_text() == "x"
    assert cancelled["status"] == "cancelled"
    assert seen_by_driver == seen_by_reviewer
    kinds = [e["type"] for e in seen_by_driver["events"]]
    assert kinds.count("approval_requested") == 1 and kinds.count("approval_decided") == 1
    assert seen_by_driver["events"][-1]["type"] == "run_finished"
    assert seen_by_driver["events"][-1]["status"] == "cancelled"
