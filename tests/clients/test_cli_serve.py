"""``loom serve`` end to end: a real daemon subprocess driven by the real MCP client over HTTP."""

from __future__ import annotations

import json
import signal
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from clients.loom.daemon import connect
from tests.clients.cli_support import run_loom, write_script
from tests.mcp_calls import call
from tests.orchestrator.daemon.daemon_process import (
    Daemon,
    file_mode,
    http,
    mcp_client,
    running_daemon,
    start_daemon,
)

pytestmark = pytest.mark.anyio

MODES = ["auto", "legacy"]
PROTOCOL = {"auto": "2026-07-28", "legacy": "2025-11-25"}
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
PING = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    """One daemon for the tests that do not stop it."""
    root = tmp_path_factory.mktemp("serve")
    with running_daemon(root / "home", root) as daemon:
        yield daemon


def two_answers(path: Path) -> str:
    # Text only: which tool calls need an approval is policy, not what these tests are about.
    turns: list[dict[str, Any]] = [{"text": "first answer"}, {"text": "second answer"}]
    return f"scripted:{write_script(path, turns)}"


async def follow(daemon: Daemon, mode: str, session_id: str) -> list[dict[str, Any]]:
    """Every stored event of the session up to the end of its first run, long-polling for new ones."""
    events: list[dict[str, Any]] = []
    after = 0
    async with mcp_client(daemon, mode) as client:
        with anyio.fail_after(20):
            while not events or events[-1]["type"] != "run_finished":
                page = await call(client, "read_events", session_id=session_id, after_seq=after, wait_s=5)
                events.extend(page["events"])
                after = page["next_after_seq"]
    return events


@pytest.mark.parametrize("mode", MODES)
async def test_clients_drive_a_session_follow_it_together_and_reconnect(
    shared: Daemon, tmp_path: Path, mode: str
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    model = two_answers(tmp_path / "script.json")
    async with mcp_client(shared, mode) as client:
        assert client.protocol_version == PROTOCOL[mode]
        session = await call(client, "create_session", cwd=str(work), model=model)
        run = await call(client, "send_message", session_id=session["session_id"], text="go", wait_s=20)
    assert (run["status"], run["final_text"]) == ("completed", "first answer")

    seen: dict[int, list[dict[str, Any]]] = {}

    async def reader(k: int) -> None:
        seen[k] = await follow(shared, mode, session["session_id"])

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader, 1)
        tg.start_soon(reader, 2)
    assert seen[1] == seen[2]
    assert [e["seq"] for e in seen[1]] == list(range(1, len(seen[1]) + 1))
    assert seen[1][-1]["run_id"] == run["run_id"]

    # A new connection: the same ids still work, and the session takes another message.
    async with mcp_client(shared, mode) as again:
        same = await call(again, "get_run", run_id=run["run_id"])
        second = await call(again, "send_message", session_id=session["session_id"], text="more", wait_s=20)
    assert (same["status"], same["final_text"]) == ("completed", "first answer")
    assert (second["status"], second["final_text"]) == ("completed", "second answer")


async def test_connect_helper_attaches_through_the_discovery_file(shared: Daemon) -> None:
    async with connect(shared.home) as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
    assert {"create_session", "send_message", "read_events", "get_run", "cancel_run"} <= tools


async def test_requests_without_the_token_are_refused(shared: Daemon) -> None:
    async with http(None) as anonymous, http("not-" + shared.token) as wrong, http(shared.token) as good:
        missing = await anonymous.post(shared.url, json=PING, headers=MCP_HEADERS)
        bad = await wrong.post(shared.url, json=PING, headers=MCP_HEADERS)
        health_missing = await anonymous.get(shared.origin + "/health")
        elsewhere = await anonymous.get(shared.origin + "/anything")
        health = await good.get(shared.origin + "/health")
    for response in (missing, bad, health_missing, elsewhere):
        assert response.status_code == 401
        assert response.headers["www-authenticate"].startswith("Bearer ")
        assert shared.token not in response.text
    assert health.status_code == 200 and health.json()["pid"] == shared.proc.pid
    assert shared.token not in shared.stderr()


async def test_foreign_origin_and_host_are_rejected(shared: Daemon) -> None:
    async with http(shared.token) as client:
        origin = await client.post(shared.url, json=PING, headers={**MCP_HEADERS, "Origin": "http://evil.example"})
        host = await client.post(shared.url, json=PING, headers={**MCP_HEADERS, "Host": "evil.example"})
        health_host = await client.get(shared.origin + "/health", headers={"Host": "evil.example:80"})
        local = await client.get(shared.origin + "/health", headers={"Origin": "http://localhost:3000"})
    assert origin.status_code == 403
    assert host.status_code == 421 and health_host.status_code == 421
    assert local.status_code == 200


async def test_token_and_discovery_files_are_private(shared: Daemon) -> None:
    assert file_mode(shared.home / "daemon.token") == 0o600
    assert file_mode(shared.home / "daemon.json") == 0o600
    assert file_mode(shared.home) == 0o700
    discovery = json.loads((shared.home / "daemon.json").read_text())
    assert set(discovery) == {"url", "pid", "started"}
    assert discovery["url"].startswith("http://127.0.0.1:") and discovery["url"].endswith("/mcp")


@pytest.mark.parametrize("era", [{}, {"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}])
async def test_malformed_and_oversized_requests_get_errors_and_the_daemon_keeps_serving(
    shared: Daemon, era: dict[str, str]
) -> None:
    headers = {**MCP_HEADERS, **era}
    async with http(shared.token) as client:
        garbled = await client.post(shared.url, content=b'{"jsonrpc": "2.0", "id": 1, "meth', headers=headers)
        not_rpc = await client.post(shared.url, json=[1, 2, 3], headers=headers)
        bad_params = await client.post(
            shared.url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": "x"}, headers=headers
        )
        huge = await client.post(shared.url, content=b"[" + b" " * (5 * 1024 * 1024) + b"]", headers=headers)
    assert (garbled.status_code, garbled.json()["error"]["code"]) == (400, -32700)
    for response in (not_rpc, bad_params):
        assert response.status_code == 400 and response.json()["error"]["code"] in (-32600, -32602)
    assert huge.status_code == 413
    for mode in MODES:
        async with mcp_client(shared, mode) as mcp:
            assert (await mcp.list_tools()).tools


def test_a_second_daemon_on_the_same_home_exits_2(shared: Daemon, tmp_path: Path) -> None:
    result = run_loom("serve", "--port", "0", cwd=tmp_path, home=shared.home)
    assert result.returncode == 2, result
    assert f"a Loom daemon is already running (pid {shared.proc.pid}, {shared.url})" in result.stderr
    assert json.loads((shared.home / "daemon.json").read_text())["pid"] == shared.proc.pid


async def test_sigterm_stops_cleanly_and_removes_the_discovery_file(tmp_path: Path) -> None:
    model = f"scripted:{write_script(tmp_path / 'slow.json', [{'text': 'slow', 'delay_s': 30}])}"
    daemon = start_daemon(tmp_path / "home", tmp_path)
    poll_ended: list[str] = []

    async def long_poll(session_id: str) -> None:
        try:
            async with mcp_client(daemon, "auto") as client:
                result = await client.call_tool(
                    "read_events", {"session_id": session_id, "after_seq": 10_000, "wait_s": 50}
                )
                poll_ended.append(f"result {result}")
        except Exception as exc:  # the daemon went away mid-call: how the client reports it is the SDK's business
            poll_ended.append(f"{type(exc).__name__}: {exc}")

    try:
        assert f"loom: daemon listening on {daemon.url} (pid {daemon.proc.pid})" in daemon.stderr()
        # A run in flight, a legacy client attached (its SSE stream open) and a modern long poll
        # waiting must neither hold the shutdown up nor end it with errors.
        async with mcp_client(daemon, "legacy") as client, anyio.create_task_group() as tg:
            session = await call(client, "create_session", cwd=str(tmp_path), model=model)
            run = await call(client, "send_message", session_id=session["session_id"], text="go")
            assert run["status"] == "running"
            tg.start_soon(long_poll, session["session_id"])
            await anyio.sleep(0.5)
            with anyio.fail_after(15):
                code = await anyio.to_thread.run_sync(daemon.stop)
    finally:
        if daemon.proc.poll() is None:
            daemon.stop(signal.SIGKILL)
    log = daemon.stderr()
    assert code == 0, log
    assert not (tmp_path / "home" / "daemon.json").exists()
    assert "Traceback" not in log and "ERROR" not in log, log
    assert len(poll_ended) == 1 and not poll_ended[0].startswith("result"), poll_ended  # ended, not hung
    # The session host was closed, not abandoned: the run in flight is recorded as interrupted.
    exported = run_loom("export", run["run_id"], cwd=tmp_path, home=tmp_path / "home")
    last = exported.events()[-1]
    assert (last.type, getattr(last, "status", None)) == ("run_finished", "interrupted"), exported


def test_unusable_port_settings_exit_2(tmp_path: Path) -> None:
    bad_env = run_loom("serve", cwd=tmp_path, home=tmp_path / "home", env={"LOOM_PORT": "seven"})
    bad_option = run_loom("serve", "--port", "70000", cwd=tmp_path, home=tmp_path / "home")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = run_loom("serve", cwd=tmp_path, home=tmp_path / "home", env={"LOOM_PORT": str(port)})
    assert bad_env.returncode == 2 and "LOOM_PORT='seven' is not a port number" in bad_env.stderr
    assert bad_option.returncode == 2 and "--port 70000 is not a port number" in bad_option.stderr
    assert busy.returncode == 2 and f"cannot listen on 127.0.0.1:{port}" in busy.stderr, busy
    assert not (tmp_path / "home" / "daemon.json").exists()


class Killed:
    """A daemon SIGKILLed in the middle of a run, and the daemon started after it on the same home."""

    def __init__(self, before: Daemon, after: Daemon, session_id: str, run_id: str, events: list[Any]) -> None:
        self.before, self.after = before, after
        self.session_id, self.run_id, self.events = session_id, run_id, events


@pytest.fixture(scope="module")
def killed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Killed]:
    root = tmp_path_factory.mktemp("killed")
    home = root / "home"
    model = f"scripted:{write_script(root / 'slow.json', [{'text': 'slow', 'delay_s': 30}])}"
    first = start_daemon(home, root, log_name="first")

    async def start_a_run() -> tuple[str, str, list[dict[str, Any]]]:
        async with mcp_client(first, "auto") as client:
            session = await call(client, "create_session", cwd=str(root), model=model)
            run = await call(client, "send_message", session_id=session["session_id"], text="go")
            assert run["status"] == "running"
            # send_message returns once the run is started, not stored: its first events land a moment later.
            with anyio.fail_after(10):
                while True:
                    page = await call(client, "read_events", session_id=session["session_id"])
                    if any(e["type"] == "user_message" for e in page["events"]):
                        break
                    await anyio.sleep(0.02)
        return session["session_id"], run["run_id"], page["events"]

    try:
        session_id, run_id, events = anyio.run(start_a_run)
        assert [e["type"] for e in events][-2:] == ["run_started", "user_message"]
    finally:
        assert first.stop(signal.SIGKILL) == -signal.SIGKILL
    assert json.loads((home / "daemon.json").read_text())["pid"] == first.proc.pid  # left behind, stale
    with running_daemon(home, root, log_name="second") as second:
        yield Killed(first, second, session_id, run_id, events)


async def test_after_sigkill_a_new_daemon_starts_and_the_run_is_in_the_store(killed: Killed, tmp_path: Path) -> None:
    assert killed.after.proc.pid != killed.before.proc.pid  # the stale discovery file was replaced
    exported = run_loom("export", killed.run_id, cwd=tmp_path, home=killed.after.home)
    assert exported.returncode == 0, exported
    stored = [(e.type, e.seq) for e in exported.events()]
    before = [(e["type"], e["seq"]) for e in killed.events if e.get("run_id") == killed.run_id]
    assert stored[: len(before)] == before
    async with mcp_client(killed.after, "auto") as client:
        assert (await client.list_tools()).tools


async def test_after_sigkill_the_restarted_daemon_shows_the_run_interrupted(killed: Killed) -> None:
    async with mcp_client(killed.after, "auto") as client:
        run = await call(client, "get_run", run_id=killed.run_id)
        page = await call(client, "read_events", session_id=killed.session_id)
    assert run["status"] == "interrupted"
    assert page["events"][: len(killed.events)] == killed.events
