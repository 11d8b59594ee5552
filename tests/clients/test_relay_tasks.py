"""Runs as MCP tasks through ``loom mcp`` attached to a real ``loom serve``, in raw 2026-07-28 JSON-RPC on its stdio.

The relay passes ``tasks/get`` and ``tasks/cancel`` through as any other request (naming the task in
``Mcp-Name``); the daemon's face answers a declaring client's ``send_message`` with a task
(orchestrator/face/tasks.py). Sessions run scripted models.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from orchestrator.face.tasks import IDENTIFIER
from tests.clients.cli_support import write_script
from tests.clients.relay_raw import RawRelay, raw_loom_mcp
from tests.orchestrator.daemon.daemon_process import running_daemon

pytestmark = pytest.mark.anyio

TEST_TIMEOUT_S = 60.0
WITH_TASKS: dict[str, Any] = {"extensions": {IDENTIFIER: {}}}
DONE = ("completed", "failed", "cancelled")


async def poll(relay: RawRelay, task_id: str, until: Sequence[str]) -> dict[str, Any]:
    with anyio.fail_after(30):
        while True:
            task = await relay.result(relay.modern("tasks/get", {"taskId": task_id}))
            if task["status"] in until:
                return task
            await anyio.sleep(0.05)


async def new_session(relay: RawRelay, work: Path, name: str, turns: list[dict[str, Any]]) -> str:
    model = f"scripted:{write_script(work / f'{name}.json', turns)}"
    made = await relay.tool("create_session", caps={}, cwd=str(work), model=model, mode="bypass")
    assert not made.get("isError"), made
    return str(made["structuredContent"]["session_id"])


async def test_a_task_through_the_relay_is_polled_to_its_result_and_another_is_cancelled(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    with running_daemon(home, tmp_path), anyio.fail_after(TEST_TIMEOUT_S):
        async with raw_loom_mcp(home, tmp_path, caps=WITH_TASKS) as relay:
            quick = await new_session(relay, work, "quick", [{"text": "through the relay", "delay_s": 0.3}])
            slow = await new_session(relay, work, "slow", [{"text": "never said", "delay_s": 60}])
            created = await relay.tool("send_message", session_id=quick, text="go", wait_s=30)
            done = await poll(relay, created["taskId"], DONE)
            stuck = await relay.tool("send_message", session_id=slow, text="take your time")
            working = await relay.result(relay.modern("tasks/get", {"taskId": stuck["taskId"]}))
            ack = await relay.result(relay.modern("tasks/cancel", {"taskId": stuck["taskId"]}))
            cancelled = await poll(relay, stuck["taskId"], DONE)
            run = await relay.tool("get_run", caps={}, run_id=done["result"]["structuredContent"]["run_id"])
            page = await relay.tool("read_events", caps={}, session_id=slow)
            stderr = relay.stderr()
    # Answered at once with the task, not after the run: the relay did not wait for what the daemon did not send.
    assert created["resultType"] == "task" and created["status"] == "working"
    assert done["status"] == "completed" and done["result"]["structuredContent"]["final_text"] == "through the relay"
    assert run["structuredContent"] == done["result"]["structuredContent"]
    assert (stuck["resultType"], working["status"]) == ("task", "working")
    assert ack["resultType"] == "complete" and "error" not in ack
    assert cancelled["status"] == "cancelled" and "result" not in cancelled
    finished = [e["status"] for e in page["structuredContent"]["events"] if e["type"] == "run_finished"]
    assert finished == ["cancelled"]
    assert "Traceback" not in stderr


async def test_a_task_id_the_daemon_does_not_know_is_its_error_not_the_relays(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with running_daemon(home, tmp_path), anyio.fail_after(TEST_TIMEOUT_S):
        async with raw_loom_mcp(home, tmp_path, caps=WITH_TASKS) as relay:
            unknown = await relay.answer(relay.modern("tasks/get", {"taskId": "t_nothing.forged"}))
            odd = await relay.answer(relay.modern("tasks/cancel", {"taskId": "héllo\nthere"}))
    for answer in (unknown, odd):
        assert "error" in answer and "Loom: forwarding" not in answer["error"]["message"], answer
        assert "Failed to retrieve task" in answer["error"]["message"], answer
