"""The standard-library relay under ``loom mcp``: what it must never import, leak or wait for.

Real parts throughout: a daemon stand-in on real uvicorn (:mod:`tests.clients.daemon_like`), real ``loom
mcp`` subprocesses driven by the real MCP client over stdio (:func:`tests.clients.test_cli_mcp.loom_mcp`).
"""

from __future__ import annotations

import io
import os
import signal
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest
from mcp import MCPError
from mcp.server.mcpserver import MCPServer

from clients.relay.sse import events
from clients.relay.wire import DRIVING_CLIENT_META
from orchestrator import protocol
from tests.clients.daemon_like import TOKEN, daemon_like, static
from tests.clients.test_cli_mcp import exited_within, loom_mcp, our_children_running

pytestmark = pytest.mark.anyio

MODES = ["auto", "legacy"]
TEST_TIMEOUT_S = 40.0
HEAVY = ("mcp", "mcp_types", "httpx", "httpx2", "pydantic", "pydantic_core", "anyio")


def echo_daemon(cancelled: threading.Event | None = None) -> MCPServer:
    daemon = MCPServer("echo-daemon")

    @daemon.tool()
    def echo(text: str) -> str:
        return text

    @daemon.tool()
    async def stuck() -> str:
        try:
            await anyio.sleep(3600)
        finally:
            if cancelled is not None:
                cancelled.set()
        return "never"

    return daemon


@pytest.mark.parametrize("mode", MODES)
async def test_an_attached_loom_mcp_never_imports_the_sdk_httpx_pydantic_or_anyio(tmp_path: Path, mode: str) -> None:
    home = tmp_path / "home"
    with daemon_like(home, static(echo_daemon())), anyio.fail_after(TEST_TIMEOUT_S):
        async with loom_mcp(home, tmp_path, mode, env={"PYTHONPROFILEIMPORTTIME": "1"}) as face:
            tools = {t.name for t in (await face.client.list_tools()).tools}
            echoed = await face.client.call_tool("echo", {"text": "héllo"})
    modules = {line.split("|")[-1].strip() for line in face.stderr().splitlines() if line.startswith("import time:")}
    assert "clients.relay.relay" in modules  # the profile did record the relay's imports
    assert sorted(m for m in modules if m.split(".")[0] in HEAVY) == []
    assert tools == {"echo", "stuck"} and echoed.structured_content == {"result": "héllo"}


def test_the_driving_client_key_is_the_protocols() -> None:
    assert DRIVING_CLIENT_META == protocol.DRIVING_CLIENT_META


@contextmanager
def listening_proxy() -> Iterator[tuple[str, list[bytes]]]:
    """A TCP listener standing in for an HTTP proxy; yields its URL and what each connection sent."""
    received: list[bytes] = []
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    done = threading.Event()

    def accept() -> None:
        while not done.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(1.0)
                try:
                    received.append(conn.recv(65536))
                except OSError:
                    received.append(b"")

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}", received
    finally:
        done.set()
        thread.join(5)
        server.close()


async def test_no_proxy_from_the_environment_sees_the_token_and_no_log_carries_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with listening_proxy() as (proxy, received), daemon_like(home, static(echo_daemon())):
        env = dict.fromkeys(("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY"), proxy)
        with anyio.fail_after(TEST_TIMEOUT_S):
            async with loom_mcp(home, tmp_path, env={**env, "LOOM_LOG_LEVEL": "DEBUG"}) as face:
                echoed = await face.client.call_tool("echo", {"text": "direct"})
    assert echoed.structured_content == {"result": "direct"}
    assert received == []
    assert TOKEN not in face.stderr()


@pytest.mark.parametrize("mode", MODES)
async def test_a_call_the_caller_cancels_is_cancelled_on_the_daemon(tmp_path: Path, mode: str) -> None:
    home = tmp_path / "home"
    cancelled = threading.Event()
    with daemon_like(home, static(echo_daemon(cancelled))), anyio.fail_after(TEST_TIMEOUT_S):
        async with loom_mcp(home, tmp_path, mode) as face:
            with pytest.raises(MCPError):  # the client gives up and sends notifications/cancelled
                await face.client.session.call_tool("stuck", {}, read_timeout_seconds=0.5)
            seen = await anyio.to_thread.run_sync(cancelled.wait, 10.0)
            after = await face.client.call_tool("echo", {"text": "still here"})
    assert seen
    assert after.structured_content == {"result": "still here"}


async def test_sigterm_ends_an_attached_loom_mcp_at_once(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with daemon_like(home, static(echo_daemon())), anyio.fail_after(TEST_TIMEOUT_S):
        async with loom_mcp(home, tmp_path, "legacy") as face:
            await face.client.call_tool("echo", {"text": "up"})
            [pid] = our_children_running("mcp")
            os.kill(pid, signal.SIGTERM)
            exited = await anyio.to_thread.run_sync(exited_within, pid, 5.0)
    assert exited  # with our end of its stdin still open
    assert "Traceback" not in face.stderr()


def test_sse_events_are_parsed_a_line_at_a_time() -> None:
    stream = io.BytesIO(
        b": keep-alive\n\n"
        b'event: message\nid: 1\ndata: {"a":\ndata:  1}\n\n'
        b'data: {"b": 2}\r\n\r\n'
        b"event: other\ndata: ignored\n\n"
        b"data: incomplete"
    )
    assert list(events(stream)) == ['{"a":\n 1}', '{"b": 2}']
