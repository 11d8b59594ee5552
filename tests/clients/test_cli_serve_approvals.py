"""Approvals and cancel through the daemon over streamable HTTP, with two real MCP clients, both eras."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from orchestrator.events import ApprovalRequested, ToolCallFinished
from tests.clients.cli_support import run_loom, write_script
from tests.mcp_calls import call
from tests.orchestrator.daemon.daemon_process import Daemon, mcp_client, running_daemon

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


TWO_WRITES: list[dict[str, Any]] = [
    {
        "text": "first",
        "tool_calls": [{"id": "w1", "name": "fs__write", "arguments": {"path": "a.txt", "content": "a"}}],
    },
    {
        "text": "second",
        "tool_calls": [{"id": "w2", "name": "fs__write", "arguments": {"path": "b.txt", "content": "b"}}],
    },
    {"text": "done"},
]


async def _pending(client: Any, sid: str) -> dict[str, Any]:
    listed = await call(client, "list_approvals", session_id=sid)
    (approval,) = listed["approvals"]
    return dict(approval)


async def test_approve_for_the_session_lets_the_same_tool_run_again_without_asking(
    daemon: Daemon, tmp_path: Path
) -> None:
    script = write_script(tmp_path / "s.json", TWO_WRITES)
    async with mcp_client(daemon, "auto") as driver, mcp_client(daemon, "auto") as reviewer:
        session = await call(driver, "create_session", cwd=str(tmp_path), model=f"scripted:{script}", mode="ask")
        sid = session["session_id"]
        run = await call(driver, "send_message", session_id=sid, text="write both", wait_s=10)
        assert run["status"] == "awaiting_approval", run
        approval = await _pending(reviewer, sid)
        assert approval["tool"] == "fs__write" and approval["arguments"] == {"path": "a.txt", "content": "a"}
        await call(
            reviewer,
            "decide_approval",
            approval_id=approval["approval_id"],
            decision="approve_session",
            decided_by="rev",
        )
        finished = await call(driver, "get_run", run_id=run["run_id"], wait_s=20)
        events = (await call(driver, "read_events", session_id=sid))["events"]
    assert finished["status"] == "completed", finished
    assert (tmp_path / "a.txt").read_text() == "a" and (tmp_path / "b.txt").read_text() == "b"
    kinds = [e["type"] for e in events]
    assert kinds.count("approval_requested") == 1  # the second write was not asked about
    (decided,) = [e for e in events if e["type"] == "approval_decided"]
    assert decided["decision"] == "approve_session" and decided["decided_by"] == "rev"


async def test_deny_with_a_reason_reaches_the_model_and_the_other_client_sees_it_taken(
    daemon: Daemon, tmp_path: Path
) -> None:
    turns = [TWO_WRITES[0], {"text": "the tool said: {{result:w1}}"}]
    script = write_script(tmp_path / "s.json", turns)
    async with mcp_client(daemon, "legacy") as driver, mcp_client(daemon, "auto") as reviewer:
        session = await call(driver, "create_session", cwd=str(tmp_path), model=f"scripted:{script}", mode="ask")
        sid = session["session_id"]
        run = await call(driver, "send_message", session_id=sid, text="write", wait_s=10)
        approval = await _pending(driver, sid)
        assert approval == await _pending(reviewer, sid)  # both clients see the same request
        await call(
            reviewer,
            "decide_approval",
            approval_id=approval["approval_id"],
            decision="deny",
            reason="not in this repo",
            decided_by="reviewer",
        )
        late = await driver.call_tool(
            "decide_approval", {"approval_id": approval["approval_id"], "decision": "approve_once"}
        )
        finished = await call(driver, "get_run", run_id=run["run_id"], wait_s=20)
        events = (await call(driver, "read_events", session_id=sid))["events"]
    # The second answer is refused, saying the approval was already decided; the first one stands.
    assert late.is_error and "not pending" in str(late.content)
    assert not (tmp_path / "a.txt").exists()
    (done,) = [e for e in events if e["type"] == "tool_call_finished"]
    assert done["failure"] == "denied" and "not in this repo" in done["content"] and "reviewer" in done["content"]
    assert finished["status"] == "completed" and "not in this repo" in finished["final_text"]
    (decided,) = [e for e in events if e["type"] == "approval_decided"]
    assert decided["decision"] == "deny" and decided["decided_by"] == "reviewer"


def test_headless_loom_run_on_the_daemon_denies_an_ask_rule_in_bounded_time(daemon: Daemon, tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / ".loom").mkdir(parents=True)
    (project / ".loom" / "policy.toml").write_text('[[rules]]\naction = "ask"\ntool = "fs__write"\n', encoding="utf-8")
    script = write_script(project / "s.json", [TWO_WRITES[0], {"text": "the tool said: {{result:w1}}"}])
    started = time.monotonic()
    result = run_loom("run", "--json", "--model", f"scripted:{script}", "write", cwd=project, home=daemon.home)
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result
    events = result.events()
    (done,) = [e for e in events if isinstance(e, ToolCallFinished)]
    assert done.failure == "denied" and "headless" in done.content and "policy rule says to ask" in done.content
    assert not any(isinstance(e, ApprovalRequested) for e in events)  # nobody was asked, nothing waits
    assert not (project / "a.txt").exists()
    assert elapsed < 60, elapsed
