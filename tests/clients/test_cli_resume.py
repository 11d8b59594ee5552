"""``loom resume`` and ``autoResume`` after a real crash: a ``loom serve`` daemon SIGKILLed mid-tool-call.

The tool runs on :mod:`tests.orchestrator.resume_test_server`, which counts executions in a file.
A scripted model restarts its script when a session is reopened, so once the daemon is dead the
script is rewritten to hold what the model says after the resume.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from orchestrator.events import RunFinished, RunResumed
from tests.clients.cli_support import REPO_ROOT, clean_env, loom_command, run_loom, write_script
from tests.mcp_calls import call
from tests.orchestrator.daemon.daemon_process import mcp_client, running_daemon, start_daemon

pytestmark = pytest.mark.anyio

SERVER = REPO_ROOT / "tests" / "orchestrator" / "resume_test_server.py"


@dataclass
class Crashed:
    """A run whose daemon was killed while one tool call was in progress."""

    root: Path
    run_id: str
    session_id: str

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def record(self) -> Path:
        return self.root / "record.txt"

    def count(self, tag: str) -> int:
        return self.record.read_text().splitlines().count(f"run {tag}") if self.record.exists() else 0


async def until(condition: Any, within_s: float = 20) -> None:
    """Wait (bounded) until ``condition()`` holds."""
    with anyio.fail_after(within_s):
        while True:
            if condition():
                return
            await anyio.sleep(0.05)


async def crash_during(
    root: Path,
    tool: str,
    *,
    auto_resume: bool = False,
    before: Sequence[dict[str, Any]] = (),
    setup: Callable[[Path], None] | None = None,
) -> Crashed:
    """Run one call of ``tool`` (held on the server) on a daemon, SIGKILL the daemon mid-call, rewrite the script.

    ``before`` are model turns played first; ``setup`` prepares the work directory.
    """
    home, work = root / "home", root / "work"
    home.mkdir()
    work.mkdir()
    if setup is not None:
        setup(work)
    server = {
        "command": sys.executable,
        "args": [str(SERVER)],
        "env": {"PYTHONPATH": str(REPO_ROOT), "RESUME_RECORD_FILE": str(root / "record.txt")},
    }
    config: dict[str, Any] = {"mcpServers": {"rs": server}}
    if auto_resume:
        config["autoResume"] = True
    (home / "config.json").write_text(json.dumps(config), encoding="utf-8")
    call_turn = {"text": "working", "tool_calls": [{"name": f"rs__{tool}", "arguments": {"tag": "x", "hold": True}}]}
    script = write_script(root / "script.json", [*before, call_turn, {"text": "not resumed"}])
    daemon = start_daemon(home, root)
    try:
        async with mcp_client(daemon, "auto") as client:
            session = await call(client, "create_session", cwd=str(work), model=f"scripted:{script}", mode="bypass")
            run = await call(client, "send_message", session_id=session["session_id"], text="go")
            crashed = Crashed(root, run["run_id"], session["session_id"])
            await until(lambda: crashed.count("x") == 1)
    finally:
        daemon.proc.kill()
        daemon.stop()
    write_script(script, [{"text": "resumed and done"}])
    return crashed


async def test_loom_resume_on_the_daemon_runs_an_unfinished_read_only_call_again(tmp_path: Path) -> None:
    crashed = await crash_during(tmp_path, "lookup")
    with running_daemon(crashed.home, tmp_path, log_name="second") as daemon:
        done = await anyio.to_thread.run_sync(
            lambda: run_loom("resume", crashed.run_id, "--json", cwd=tmp_path, home=crashed.home)
        )
        async with mcp_client(daemon, "auto") as client:
            run = await call(client, "get_run", run_id=crashed.run_id)
    assert done.returncode == 0, done
    events = done.events()
    assert any(isinstance(e, RunResumed) for e in events)
    final = events[-1]
    assert isinstance(final, RunFinished) and (final.run_id, final.status) == (crashed.run_id, "completed")
    assert (run["status"], run["final_text"]) == ("completed", "resumed and done")
    assert crashed.count("x") == 2


def start_resume(crashed: Crashed) -> subprocess.Popen[str]:
    """``loom resume RUN`` in the background, its output captured."""
    return subprocess.Popen(
        [*loom_command(), "resume", crashed.run_id],
        cwd=crashed.root,
        env=clean_env(crashed.home),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        encoding="utf-8",
    )


async def test_loom_resume_on_the_daemon_waits_for_a_review_that_loom_deny_answers(tmp_path: Path) -> None:
    crashed = await crash_during(tmp_path, "charge")
    with running_daemon(crashed.home, tmp_path, log_name="second") as daemon:
        resume = await anyio.to_thread.run_sync(start_resume, crashed)
        try:
            async with mcp_client(daemon, "auto") as client:
                approvals: list[dict[str, Any]] = []

                async def pending() -> bool:
                    approvals[:] = (await call(client, "list_approvals"))["approvals"]
                    return bool(approvals)

                with anyio.fail_after(20):
                    while True:
                        if await pending():
                            break
                        await anyio.sleep(0.1)
                (approval,) = approvals
                assert approval["kind"] == "review" and approval["run_id"] == crashed.run_id
                assert (await call(client, "get_run", run_id=crashed.run_id))["status"] == "needs_review"
                denied = await anyio.to_thread.run_sync(
                    lambda: run_loom(
                        "deny", approval["approval_id"], "--reason", "already charged", cwd=tmp_path, home=crashed.home
                    )
                )
                assert denied.returncode == 0, denied
            out, err = await anyio.to_thread.run_sync(lambda: resume.communicate(timeout=30))
        finally:
            if resume.poll() is None:
                resume.send_signal(signal.SIGKILL)
                resume.wait()
    assert resume.returncode == 0, err
    assert "review needed for rs__charge" in err and "resumed and done" in out
    assert crashed.count("x") == 1


async def test_loom_resume_without_a_daemon_is_headless(tmp_path: Path) -> None:
    crashed = await crash_during(tmp_path, "charge")
    stopped = await anyio.to_thread.run_sync(
        lambda: run_loom("resume", crashed.run_id, cwd=tmp_path, home=crashed.home)
    )
    assert stopped.returncode == 1, stopped
    assert f"run {crashed.run_id} needs_review" in stopped.stderr and "rs__charge" in stopped.stderr
    assert f"resumed run {crashed.run_id} after step 1: needs review toolu_0000_0" in stopped.stderr
    assert crashed.count("x") == 1
    runs = await anyio.to_thread.run_sync(lambda: run_loom("runs", cwd=tmp_path, home=crashed.home))
    assert "needs_review" in runs.stdout


async def test_loom_resume_without_a_daemon_runs_an_unfinished_idempotent_call_again(tmp_path: Path) -> None:
    crashed = await crash_during(tmp_path, "put")
    done = await anyio.to_thread.run_sync(lambda: run_loom("resume", crashed.run_id, cwd=tmp_path, home=crashed.home))
    again = await anyio.to_thread.run_sync(lambda: run_loom("resume", crashed.run_id, cwd=tmp_path, home=crashed.home))
    assert done.returncode == 0, done
    assert "resumed and done" in done.stdout
    assert crashed.count("x") == 2
    assert again.returncode == 2 and "completed" in again.stderr


async def test_auto_resume_continues_interrupted_runs_when_the_daemon_starts(tmp_path: Path) -> None:
    crashed = await crash_during(tmp_path, "lookup", auto_resume=True)
    with running_daemon(crashed.home, tmp_path, log_name="second") as daemon:
        async with mcp_client(daemon, "auto") as client:
            run = await call(client, "get_run", run_id=crashed.run_id, wait_s=20)
            page = await call(client, "read_events", session_id=crashed.session_id)
    assert (run["status"], run["final_text"]) == ("completed", "resumed and done"), run
    assert crashed.count("x") == 2
    types = [e["type"] for e in page["events"] if e.get("run_id") == crashed.run_id]
    assert types.count("run_finished") == 2 and types[-1] == "run_finished"
    assert "run_resumed" in types


async def test_a_run_killed_while_resumed_is_marked_interrupted_and_auto_resumed_again(tmp_path: Path) -> None:
    crashed = await crash_during(tmp_path, "lookup", auto_resume=True)
    script = tmp_path / "script.json"
    held = {"text": "again", "tool_calls": [{"name": "rs__lookup", "arguments": {"tag": "y", "hold": True}}]}
    write_script(script, [held, {"text": "not resumed"}])
    second = start_daemon(crashed.home, tmp_path, log_name="second")
    try:
        await until(lambda: crashed.count("y") == 1)  # the resumed run is in its next step
    finally:
        second.proc.kill()
        second.stop()
    write_script(script, [{"text": "resumed and done"}])
    with running_daemon(crashed.home, tmp_path, log_name="third") as daemon:
        async with mcp_client(daemon, "auto") as client:
            run = await call(client, "get_run", run_id=crashed.run_id, wait_s=20)
            page = await call(client, "read_events", session_id=crashed.session_id)
    assert (run["status"], run["final_text"]) == ("completed", "resumed and done"), run
    assert (crashed.count("x"), crashed.count("y")) == (2, 2)
    ends = [e["status"] for e in page["events"] if e["type"] == "run_finished"]
    assert ends == ["interrupted", "interrupted", "completed"]
    assert sum(e["type"] == "run_resumed" for e in page["events"]) == 2
