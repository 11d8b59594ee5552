"""The CLI as a client of the face: sessions, send, attach, approvals, approve/deny, run on the daemon."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.clients.cli_support import make_project, parse_events, run_loom, write_script
from tests.mcp_calls import call
from tests.orchestrator.daemon.daemon_process import mcp_client, running_daemon

WRITE_THEN_DONE: list[dict[str, Any]] = [
    {"text": "writing", "tool_calls": [{"name": "fs__write", "arguments": {"path": "out.txt", "content": "hi"}}]},
    {"text": "all done"},
]


def test_without_a_daemon_sessions_persist_and_send_continues_one(tmp_path: Path) -> None:
    project, home = make_project(tmp_path / "p"), tmp_path / "home"
    script = write_script(tmp_path / "s.json", [{"text": "first"}])
    assert run_loom("run", "--model", f"scripted:{script}", "one", cwd=project, home=home).returncode == 0
    listed = run_loom("sessions", cwd=project, home=home)
    header, line = listed.stdout.splitlines()
    assert header.split() == ["SESSION", "STATUS", "MODE", "MODEL", "CTX", "CWD"]
    session_id = line.split()[0]
    sent = run_loom("send", session_id, "two", cwd=project, home=home)
    attached = run_loom("attach", session_id, "--no-follow", "--json", cwd=project, home=home)
    assert sent.returncode == 0, sent
    assert sent.stdout.strip() == "first"  # the reopened session replays its script from the start
    events = parse_events(attached.stdout)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert [getattr(e, "text", None) for e in events if e.type == "user_message"] == ["one", "two"]
    unknown = run_loom("send", "s_nope", "x", cwd=project, home=home)
    assert unknown.returncode == 2 and "no session 's_nope'" in unknown.stderr


def test_with_a_daemon_run_is_visible_and_approvals_are_answered_from_the_cli(tmp_path: Path) -> None:
    project, home = make_project(tmp_path / "p"), tmp_path / "home"
    script = write_script(tmp_path / "s.json", WRITE_THEN_DONE)
    with running_daemon(home, tmp_path) as daemon:
        ran = run_loom("run", "--model", f"scripted:{script}", "go", cwd=project, home=home)
        assert ran.returncode == 0, ran
        assert "all done" in ran.stdout and (project / "out.txt").read_text() == "hi"
        (project / "out.txt").unlink()

        async def drive() -> str:
            async with mcp_client(daemon, "auto") as client:
                session = await call(client, "create_session", cwd=str(project), model=f"scripted:{script}")
                run = await call(client, "send_message", session_id=session["session_id"], text="go", wait_s=5)
                assert run["status"] == "awaiting_approval"
                return str(session["session_id"])

        session_id = anyio.run(drive)
        pending = run_loom("approvals", cwd=project, home=home)
        approval_id = pending.stdout.split()[0]
        assert "fs__write" in pending.stdout and approval_id.startswith("ap_")
        approved = run_loom("approve", approval_id, cwd=project, home=home)
        assert approved.returncode == 0, approved
        deadline = time.monotonic() + 10
        while not (project / "out.txt").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        twice = run_loom("deny", approval_id, "--reason", "late", cwd=project, home=home)
        none_left = run_loom("approvals", cwd=project, home=home)
        attached = run_loom("attach", session_id, "--no-follow", "--json", cwd=project, home=home)
        sessions = run_loom("sessions", cwd=project, home=home)
    assert (project / "out.txt").read_text() == "hi"
    assert twice.returncode == 2 and "not pending" in twice.stderr
    assert (none_left.returncode, none_left.stdout) == (0, "no approvals waiting\n")
    decided = [e for e in parse_events(attached.stdout) if e.type == "approval_decided"]
    assert [(getattr(e, "decision", ""), getattr(e, "decided_by", "")) for e in decided] == [("approve_once", "cli")]
    assert len(sessions.stdout.splitlines()) == 3  # a header, the `loom run` session and the driven one


pytestmark = pytest.mark.timeout(120)


def test_errors_name_cli_commands_not_face_tools(tmp_path: Path) -> None:
    home = tmp_path / "home"
    sent = run_loom("send", "s_nope", "hello", cwd=tmp_path, home=home)
    assert sent.returncode == 2, sent
    assert "`loom sessions` lists them" in sent.stderr and "list_sessions" not in sent.stderr, sent
    approved = run_loom("approve", "a_nope", cwd=tmp_path, home=home)
    assert "`loom approvals` lists the pending ones" in approved.stderr, approved


def test_an_unusable_daemon_token_is_a_plain_error(tmp_path: Path) -> None:
    from tests.clients.daemon_like import daemon_like, face_of

    home = tmp_path / "home"
    with daemon_like(home, face_of(home)):
        (home / "daemon.token").write_text("")  # a daemon that died while creating it
        listed = run_loom("approvals", cwd=tmp_path, home=home)

    assert listed.returncode == 2, listed
    assert listed.stderr.startswith("loom: error: ") and "daemon.token is empty" in listed.stderr, listed
    assert "Traceback" not in listed.stderr, listed
