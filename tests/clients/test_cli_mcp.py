"""``loom mcp`` as another agent runs it: a real subprocess driven by the real MCP client over stdio.

Without a daemon it serves an embedded runtime; with one (found through ``$LOOM_HOME/daemon.json``)
it forwards every call to it, so that all its clients share the same sessions.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp import types as mt
from mcp.client.context import ClientRequestContext
from mcp.client.session import ElicitationFnT
from mcp.client.stdio import stdio_client

from orchestrator.runtime.embedded import find_run
from tests.clients.cli_support import loom_command, processes_matching, run_loom, write_script
from tests.clients.daemon_like import daemon_like, face_of, publish
from tests.orchestrator.daemon.daemon_process import running_daemon
from tests.orchestrator.models.live_server import closed_port_url

pytestmark = pytest.mark.anyio

MODES = ["auto", "legacy"]
FACE_TOOLS = {"create_session", "send_message", "get_run", "cancel_run", "read_events", "list_sessions"}
TEST_TIMEOUT_S = 30.0


@dataclass
class Face:
    """A driving client of one ``loom mcp`` process."""

    client: Client
    stderr_path: Path
    wire_errors: list[Exception]

    async def raw(self, tool: str, **arguments: Any) -> mt.CallToolResult:
        return await self.client.call_tool(tool, arguments)

    async def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        result = await self.raw(tool, **arguments)
        assert not result.is_error, f"{tool}: {result.content}\n{self.stderr()}"
        content: dict[str, Any] | None = result.structured_content
        assert content is not None
        return content

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")


@contextlib.asynccontextmanager
async def loom_mcp(
    home: Path,
    cwd: Path,
    mode: str = "auto",
    name: str = "mcp",
    elicitation_callback: ElicitationFnT | None = None,
    *,
    env: Mapping[str, str] | None = None,
    client_name: str | None = None,
) -> AsyncIterator[Face]:
    """Start ``loom mcp`` (``LOOM_HOME=home``, plus ``env``) and connect to it over stdio as ``client_name``."""
    command = loom_command()
    params = StdioServerParameters(
        command=command[0],
        args=[*command[1:], "mcp"],
        # PYTHONPATH passes through, so that a checkout other than the installed one can be tested.
        env={"LOOM_HOME": str(home), "PATH": os.environ["PATH"], **_pythonpath(), **(env or {})},
        cwd=str(cwd),
    )
    wire_errors: list[Exception] = []

    async def on_message(message: object) -> None:
        if isinstance(message, Exception):  # a line on our stdout that is not a JSON-RPC message
            wire_errors.append(message)

    stderr_path = cwd / f"{name}.stderr"
    with stderr_path.open("w", encoding="utf-8") as errlog:
        transport = stdio_client(params, errlog=errlog)
        info = mt.Implementation(name=client_name, version="9.9") if client_name else None
        async with Client(
            transport,
            mode=mode,
            message_handler=on_message,
            elicitation_callback=elicitation_callback,
            client_info=info,
        ) as client:
            yield Face(client, stderr_path, wire_errors)
    assert wire_errors == [], stderr_path.read_text(encoding="utf-8")


def _pythonpath() -> dict[str, str]:
    return {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}


def scripted(path: Path, turns: Sequence[dict[str, Any]]) -> str:
    return f"scripted:{write_script(path, turns)}"


def seqs(page: dict[str, Any]) -> list[int]:
    return [event["seq"] for event in page["events"]]


@pytest.mark.parametrize("mode", MODES)
async def test_embedded_loom_mcp_runs_a_session_to_the_end(tmp_path: Path, mode: str) -> None:
    work = tmp_path / "work"
    work.mkdir()
    model = scripted(
        tmp_path / "script.json",
        [
            {"text": "writing", "tool_calls": [{"name": "fs__write", "arguments": {"path": "a.txt", "content": "A"}}]},
            {"text": "wrote a.txt"},
        ],
    )
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with loom_mcp(tmp_path / "home", tmp_path, mode) as face:
            tools = {t.name for t in (await face.client.list_tools()).tools}
            session = await face.call("create_session", cwd=str(work), model=model, mode="bypass")
            run = await face.call("send_message", session_id=session["session_id"], text="go", wait_s=20)
            page = await face.call("read_events", session_id=session["session_id"])
    assert FACE_TOOLS <= tools
    assert (run["status"], run["final_text"]) == ("completed", "wrote a.txt")
    assert (work / "a.txt").read_text() == "A"
    assert seqs(page) == list(range(1, len(page["events"]) + 1))
    assert page["events"][-1]["type"] == "run_finished" and page["events"][-1]["status"] == "completed"


async def test_output_on_stdout_from_tool_processes_never_reaches_the_wire(tmp_path: Path) -> None:
    # The shell's parent is `loom mcp`, or bwrap (whose parent is `loom mcp`) when the sandbox is on.
    parent = 'p=$PPID; [ "$(cat /proc/$p/comm)" = bwrap ] && read -r _ _ _ p _ < /proc/$p/stat; '
    noise = f"echo plain-noise; {parent}echo noise-on-loom-mcp-stdout > /proc/$p/fd/1; echo to-stderr >&2"
    model = scripted(
        tmp_path / "script.json",
        [
            {"text": "noisy", "tool_calls": [{"name": "shell__run", "arguments": {"command": noise}}]},
            {"text": "first done"},
            {"text": "second done"},
        ],
    )
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with loom_mcp(tmp_path / "home", tmp_path) as face:
            session = await face.call("create_session", cwd=str(tmp_path), model=model, mode="bypass")
            first = await face.call("send_message", session_id=session["session_id"], text="one", wait_s=20)
            second = await face.call("send_message", session_id=session["session_id"], text="two", wait_s=20)
            page = await face.call("read_events", session_id=session["session_id"])
    assert (first["status"], second["status"]) == ("completed", "completed")
    assert second["final_text"] == "second done"
    assert [e["type"] for e in page["events"]].count("run_finished") == 2
    (result,) = [e for e in page["events"] if e["type"] == "tool_call_finished"]
    if "sandboxed" in result["content"]:
        # In the bwrap sandbox (capabilities dropped, its own pid namespace) the command cannot even name
        # `loom mcp`'s fds: the process is not in its /proc, or opening its fd is refused.
        assert "Permission denied" in result["content"] or "No such file" in result["content"], result
    else:
        # bash's parent is `loom mcp`: what it wrote to that process's fd 1 went to stderr, not onto the wire
        assert "noise-on-loom-mcp-stdout" in face.stderr()


async def test_a_later_loom_mcp_process_sees_the_sessions_of_an_earlier_one(tmp_path: Path) -> None:
    home = tmp_path / "home"
    model = scripted(tmp_path / "script.json", [{"text": "hello"}])
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with loom_mcp(home, tmp_path, name="first") as first:
            session = await first.call("create_session", cwd=str(tmp_path), model=model)
            run = await first.call("send_message", session_id=session["session_id"], text="hi", wait_s=20)
            page = await first.call("read_events", session_id=session["session_id"])
        async with loom_mcp(home, tmp_path, name="second") as second:
            listed = await second.call("list_sessions")
            replay = await second.call("read_events", session_id=session["session_id"])
            again = await second.call("send_message", session_id=session["session_id"], text="again", wait_s=20)
            stored = await second.call("get_run", run_id=run["run_id"])
    assert session["session_id"] in [s["session_id"] for s in listed["sessions"]]
    assert replay["events"] == page["events"]
    assert (again["status"], stored["status"], stored["final_text"]) == ("completed", "completed", "hello")


async def test_sigterm_stops_loom_mcp_cleanly_and_records_the_run_as_interrupted(tmp_path: Path) -> None:
    home = tmp_path / "home"
    model = scripted(tmp_path / "script.json", [{"text": "slow", "delay_s": 30}])
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with loom_mcp(home, tmp_path) as face:
            session = await face.call("create_session", cwd=str(tmp_path), model=model)
            run = await face.call("send_message", session_id=session["session_id"], text="go")
            [pid] = our_children_running("mcp")
            os.kill(pid, signal.SIGTERM)
            exited = await anyio.to_thread.run_sync(exited_within, pid, 10.0)
    found = await find_run(home, run["run_id"])
    assert run["status"] == "running" and exited  # with our end of its stdin still open
    assert found is not None and found[0].status == "interrupted"
    assert "Traceback" not in face.stderr()


def exited_within(pid: int, timeout_s: float) -> bool:
    """Whether process ``pid`` exits (or is a zombie waiting to be reaped) within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return True
        if stat[stat.rfind(")") + 2 :][:1] in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


def our_children_running(last_arg: str) -> list[int]:
    """Live child processes of this test process whose command line ends with ``last_arg``."""
    found = []
    for pid, state in processes_matching(last_arg).items():
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        ppid = int(stat[stat.rfind(")") + 2 :].split()[1])
        if ppid == os.getpid() and state not in ("Z", "X") and cmdline[-2:-1] == [last_arg.encode()]:
            found.append(pid)
    return found


@pytest.mark.parametrize("mode", MODES)
async def test_two_loom_mcp_processes_attached_to_one_daemon_share_its_sessions(tmp_path: Path, mode: str) -> None:
    home = tmp_path / "home"
    work = tmp_path / "work"
    work.mkdir()
    write = {"name": "fs__write", "arguments": {"path": "b.txt", "content": "B"}}
    model = scripted(tmp_path / "script.json", [{"text": "asking", "tool_calls": [write]}, {"text": "wrote b.txt"}])
    asked: list[str] = []

    async def approve(context: ClientRequestContext, params: mt.ElicitRequestParams) -> mt.ElicitResult:
        asked.append(params.message)
        return mt.ElicitResult(action="accept", content={"decision": "approve_once", "reason": ""})

    with daemon_like(home, face_of(home)), anyio.fail_after(TEST_TIMEOUT_S):
        async with (
            loom_mcp(home, tmp_path, mode, "a") as a,
            loom_mcp(home, tmp_path, mode, "b", elicitation_callback=approve) as b,
        ):
            session = await a.call("create_session", cwd=str(work), model=model, mode="ask")
            run = await a.call("send_message", session_id=session["session_id"], text="go", wait_s=20)
            # The approval lives in the daemon's memory: only a client of the same runtime can see it.
            pending = await b.call("list_approvals", session_id=session["session_id"])
            # b's user is asked through elicitation, relayed by b's `loom mcp` from the daemon.
            reviewed = await b.call("review_approval", approval_id=run["pending_approvals"][0])
            done = await a.call("get_run", run_id=run["run_id"], wait_s=20)
            seen_by_a = await a.call("read_events", session_id=session["session_id"])
            seen_by_b = await b.call("read_events", session_id=session["session_id"])
    assert run["status"] == "awaiting_approval"
    assert [p["approval_id"] for p in pending["approvals"]] == run["pending_approvals"]
    assert len(asked) == 1 and "fs__write" in asked[0]
    # Recorded as decided by the client driving b (the SDK's default clientInfo name), not by `loom mcp`.
    assert (reviewed["decision"], reviewed["decided_by"]) == ("approve_once", "mcp:mcp")
    assert (done["status"], done["final_text"]) == ("completed", "wrote b.txt")
    assert (work / "b.txt").read_text() == "B"
    assert seen_by_a == seen_by_b and seen_by_a["events"][-1]["type"] == "run_finished"
    assert "embedded" not in a.stderr() + b.stderr()


async def test_after_the_daemon_stops_calls_say_so_and_a_restarted_daemon_is_picked_up(tmp_path: Path) -> None:
    home = tmp_path / "home"
    model = scripted(tmp_path / "script.json", [{"text": "hello"}])
    with anyio.fail_after(TEST_TIMEOUT_S), contextlib.ExitStack() as daemon:
        daemon.enter_context(daemon_like(home, face_of(home)))
        async with loom_mcp(home, tmp_path) as face:
            session = await face.call("create_session", cwd=str(tmp_path), model=model)
            await anyio.to_thread.run_sync(daemon.close)
            stopped = await face.raw("get_session", session_id=session["session_id"])
            with daemon_like(home, face_of(home)):  # started again, on another port
                back = await face.call("get_session", session_id=session["session_id"])
    assert stopped.is_error and "daemon is not running" in text_of(stopped) and "`loom serve`" in text_of(stopped)
    assert back["session_id"] == session["session_id"]


async def test_a_stale_discovery_file_means_an_embedded_runtime(tmp_path: Path) -> None:
    home = tmp_path / "home"
    publish(home, f"{closed_port_url()}/mcp")  # a live pid (ours) but nothing listening: a killed daemon's leftover
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with loom_mcp(home, tmp_path) as face:
            session = await face.call("create_session", cwd=str(tmp_path), model="scripted:demo")
    assert session["session_id"].startswith("s_")
    assert "running an embedded runtime instead" in face.stderr()


def test_a_daemon_that_refuses_the_token_is_an_error_not_a_second_runtime(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with daemon_like(home, face_of(home), token="the-daemons-token"):
        publish(home, json.loads((home / "daemon.json").read_text())["url"], token="a-stale-token")
        result = run_loom("mcp", cwd=tmp_path, home=home, timeout_s=TEST_TIMEOUT_S)
    assert result.returncode == 1, result
    assert "refused the token" in result.stderr and "loom serve" in result.stderr
    assert result.stdout == "" and "Traceback" not in result.stderr


async def test_loom_mcp_attaches_to_a_real_loom_serve_and_reports_when_it_stops(tmp_path: Path) -> None:
    home = tmp_path / "home"
    model = scripted(tmp_path / "script.json", [{"text": "hello from the daemon"}])
    with running_daemon(home, tmp_path) as daemon, anyio.fail_after(TEST_TIMEOUT_S):
        async with loom_mcp(home, tmp_path, "auto", "a") as a, loom_mcp(home, tmp_path, "legacy", "b") as b:
            session = await a.call("create_session", cwd=str(tmp_path), model=model)
            run = await b.call("send_message", session_id=session["session_id"], text="hi", wait_s=20)
            seen = await a.call("get_run", run_id=run["run_id"])

            async def stop_daemon() -> None:
                await anyio.sleep(0.5)
                await anyio.to_thread.run_sync(daemon.stop)

            async with anyio.create_task_group() as tg:
                tg.start_soon(stop_daemon)
                waiting = await a.raw("read_events", session_id=session["session_id"], after_seq=10_000, wait_s=20)
            after = await b.raw("get_run", run_id=run["run_id"])
    assert (seen["status"], seen["final_text"]) == ("completed", "hello from the daemon")
    assert waiting.is_error and "stopped while read_events was in progress" in text_of(waiting)
    assert after.is_error and "daemon is not running" in text_of(after) and "`loom serve`" in text_of(after)


def text_of(result: mt.CallToolResult) -> str:
    return " ".join(c.text for c in result.content if isinstance(c, mt.TextContent))
