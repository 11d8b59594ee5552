"""The issue's crash test: a ``loom serve`` daemon SIGKILLed mid-orchestration, with a task passed, one running and
one pending; restarted with ``autoResume``, the graph completes, no finished task runs again, no side effect repeats.

Each executor appends one line to ``log.txt``. A scripted model restarts its script when its session is reopened,
so the executor script is swapped while the graph runs: the first executor appends at once; the second, opened
after the swap, is still thinking (before its append) when the daemon dies; after the kill the script appends at
once again, which is what the second executor's resumed run and the third's fresh one play.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from tests.mcp_calls import call
from tests.orchestrator.daemon.daemon_process import mcp_client, start_daemon
from tests.orchestrator.face.orchestration_support import executor_turns, install_roles, log_lines, write_turns

pytestmark = pytest.mark.anyio


async def until(client: Client, session_id: str, check: Any, within_s: float = 30) -> dict[str, Any]:
    """The orchestration's snapshot once ``check(snapshot)`` holds, re-read whenever the session's stream moves."""
    after = 0
    with anyio.fail_after(within_s):
        while True:
            snapshot = await call(client, "get_orchestration", session_id=session_id)
            if check(snapshot):
                return snapshot
            page = await call(client, "read_events", session_id=session_id, after_seq=after, wait_s=5)
            after = page["next_after_seq"]


def states(snapshot: dict[str, Any]) -> list[str]:
    return sorted(task["state"] for task in snapshot["tasks"])


async def test_a_daemon_killed_mid_graph_resumes_it_without_running_a_finished_task_again(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (home / "config.json").write_text(json.dumps({"autoResume": True}), encoding="utf-8")
    plan = {
        "tasks": [
            {"id": "a", "title": "A", "brief": "Append.", "criteria": ["a line"]},
            {"id": "b", "title": "B", "brief": "Append.", "criteria": ["a line"]},
            {"id": "c", "title": "C", "brief": "Append.", "depends_on": ["a", "b"], "criteria": ["a line"]},
        ]
    }
    # The first executor appends at once, then takes a second to report: the swap below lands in that second.
    scripts = install_roles(home, tmp_path, plan=plan, executor=executor_turns(after_s=1.0))
    daemon = start_daemon(home, tmp_path)
    try:
        async with mcp_client(daemon, "auto") as client:
            session = await call(client, "create_session", cwd=str(work), model="scripted:demo", mode="bypass")
            sid = session["session_id"]
            started = await call(
                client, "orchestrate", session_id=sid, goal="ship it", max_parallel=1, task_timeout_s=30
            )
            await until(client, sid, lambda s: "running" in states(s))
            write_turns(scripts["executor"], executor_turns(delay_s=60))  # the next executor hangs before appending
            before = await until(client, sid, lambda s: states(s) == ["passed", "pending", "running"])
    finally:
        daemon.proc.kill()  # SIGKILL: nothing is closed or recorded on the way out
        daemon.proc.wait(timeout=10)
        daemon.stop()
    assert log_lines(work) == 1, "the running executor must still be thinking when the daemon dies"
    write_turns(scripts["executor"], executor_turns())

    second = start_daemon(home, tmp_path, log_name="second")
    try:
        async with mcp_client(second, "auto") as client:
            with anyio.fail_after(45):
                done = await call(
                    client, "get_orchestration", session_id=sid, orchestration_id=started["orchestration_id"], wait_s=40
                )
            sessions = (await call(client, "list_sessions"))["sessions"]
            runs: dict[str, int] = {}
            for s in sessions:
                if s.get("parent_session_id") == sid:
                    page = await call(client, "read_events", session_id=s["session_id"], limit=1000)
                    runs[s["session_id"]] = sum(1 for e in page["events"] if e["type"] == "run_started")
    finally:
        second.stop()
    assert done["status"] == "passed", done
    assert states(done) == ["passed", "passed", "passed"]
    kids = [s for s in sessions if s.get("parent_session_id") == sid]
    assert Counter(s["agent"] for s in kids) == {"planner": 1, "executor": 3, "reviewer": 3}  # none started twice
    assert sorted(runs.values()) == [1] * 7  # the killed executor's run was resumed under its own id, not re-sent
    assert log_lines(work) == 3  # every executor's append ran exactly once
    finished = [t for t in before["tasks"] if t["state"] == "passed"]
    assert [t["attempts"] for t in done["tasks"] if t["id"] == finished[0]["id"]] == [1]  # the passed one: not re-run
