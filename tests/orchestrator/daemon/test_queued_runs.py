"""A message queued behind a running run survives a crash: marked interrupted, then resumed from the start."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.clients.cli_support import write_script
from tests.mcp_calls import call
from tests.orchestrator.daemon.daemon_process import mcp_client, start_daemon

pytestmark = pytest.mark.anyio


async def test_a_queued_message_is_kept_through_a_kill_and_runs_when_resumed(tmp_path: Path) -> None:
    # Every run's first model turn is slow, so the first run is still going when the second arrives.
    script = write_script(tmp_path / "s.json", [{"text": "answered", "delay_s": 3}])
    home = tmp_path / "home"
    first_daemon = start_daemon(home, tmp_path, log_name="first")
    try:
        async with mcp_client(first_daemon, "auto") as client:
            session = await call(client, "create_session", cwd=str(tmp_path), model=f"scripted:{script}")
            sid = session["session_id"]
            running = await call(client, "send_message", session_id=sid, text="first")
            queued = await call(client, "send_message", session_id=sid, text="second, please")
            assert (running["status"], queued["status"]) == ("running", "queued")
    finally:
        first_daemon.stop(signal.SIGKILL)
    second_daemon = start_daemon(home, tmp_path, log_name="second")
    try:
        async with mcp_client(second_daemon, "auto") as client:
            lost = await call(client, "get_run", run_id=queued["run_id"])
            resumed = await call(client, "resume_run", run_id=queued["run_id"], wait_s=30)
            events = (await call(client, "read_events", session_id=sid))["events"]
    finally:
        second_daemon.stop()
    assert lost["status"] == "interrupted" and "queued" in lost["reason"], lost
    assert (resumed["status"], resumed["final_text"]) == ("completed", "answered"), resumed
    mine = [e for e in events if e.get("run_id") == queued["run_id"]]
    kinds = [e["type"] for e in mine]
    assert kinds[0] == "run_queued" and kinds.count("run_started") == 1 and kinds[-1] == "run_finished"
    assert [e["text"] for e in mine if e["type"] == "user_message"] == ["second, please"]
