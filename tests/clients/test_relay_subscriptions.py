"""Resource subscriptions through ``loom mcp`` attached to a real ``loom serve``: both eras' update notifications.

2025 era: the daemon sends ``notifications/resources/updated`` on the session's GET stream, which the relay
opens, relays, and opens again with ``Last-Event-ID`` when it breaks (a TCP forwarder between the relay and
the daemon cuts it). 2026-07-28: ``subscriptions/listen`` is a POST whose SSE response the relay streams
through as it comes. Real parts throughout: ``loom serve`` and ``loom mcp`` subprocesses, scripted models.
"""

from __future__ import annotations

import contextlib
import http.server
import io
import os
import socket
import threading
import time
import warnings
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, MCPDeprecationWarning, StdioServerParameters
from mcp import types as mt
from mcp.client.stdio import stdio_client
from mcp.server.mcpserver import Context, MCPServer

from clients.relay.sse import events_with_ids
from clients.relay.standalone import Standalone
from clients.relay.upstream import Endpoint, Upstream
from tests.clients.cli_support import loom_command, write_script
from tests.clients.daemon_like import daemon_like, publish, static
from tests.clients.relay_raw import RawRelay, raw_loom_mcp
from tests.orchestrator.daemon.daemon_process import Daemon, running_daemon

pytestmark = pytest.mark.anyio

TEST_TIMEOUT_S = 60.0
UPDATED = "notifications/resources/updated"


def model(tmp_path: Path, *texts: str) -> str:
    return f"scripted:{write_script(tmp_path / 'script.json', [{'text': t} for t in texts])}"


@contextlib.asynccontextmanager
async def legacy_client(home: Path, cwd: Path, on_message: Any, **options: Any) -> AsyncIterator[Client]:
    """The SDK's client in the 2025 era over stdio to ``loom mcp`` (attached to the daemon on ``home``)."""
    command = loom_command()
    env = {"LOOM_HOME": str(home), "PATH": os.environ["PATH"]}
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    params = StdioServerParameters(command=command[0], args=[*command[1:], "mcp"], env=env, cwd=str(cwd))
    with (cwd / "legacy.stderr").open("w", encoding="utf-8") as errlog:
        transport = stdio_client(params, errlog=errlog)
        async with Client(transport, mode="legacy", message_handler=on_message, **options) as client:
            yield client


async def test_a_2025_era_subscriber_through_the_relay_hears_of_a_run_of_the_session(tmp_path: Path) -> None:
    home = tmp_path / "home"
    updated: list[str] = []
    heard = anyio.Event()

    async def on_message(message: object) -> None:
        if isinstance(message, mt.ResourceUpdatedNotification):
            updated.append(str(message.params.uri))
            heard.set()

    with running_daemon(home, tmp_path), anyio.fail_after(TEST_TIMEOUT_S):
        async with legacy_client(home, tmp_path, on_message) as client:
            made = await client.call_tool("create_session", {"cwd": str(tmp_path), "model": model(tmp_path, "done")})
            session_id = (made.structured_content or {})["session_id"]
            uri = f"loom://sessions/{session_id}/state"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await client.subscribe_resource(uri)
            assert updated == []  # nothing happened to the session yet
            run = await client.call_tool("send_message", {"session_id": session_id, "text": "go", "wait_s": 20})
            with anyio.fail_after(10):
                await heard.wait()
    assert (run.structured_content or {})["status"] == "completed"
    assert updated[0] == uri


async def test_a_2026_listen_through_the_relay_streams_its_frames_as_they_come(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with running_daemon(home, tmp_path), anyio.fail_after(TEST_TIMEOUT_S):
        async with raw_loom_mcp(home, tmp_path) as relay:
            made = await relay.tool("create_session", cwd=str(tmp_path), model=model(tmp_path, "listened"))
            session_id = made["structuredContent"]["session_id"]
            uri = f"loom://sessions/{session_id}/state"
            listen = relay.modern("subscriptions/listen", {"notifications": {"resourceSubscriptions": [uri]}})
            await relay.send(listen)
            # The stream never ends by itself: its acknowledgement arrives only if the relay does not buffer.
            ack = await relay.wait_for(lambda m: m.get("method") == "notifications/subscriptions/acknowledged")
            run = await relay.tool("send_message", session_id=session_id, text="go", wait_s=20)
            update = await relay.wait_for(lambda m: m.get("method") == UPDATED)
            await relay.send(
                {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": listen["id"]}}
            )
            after = await relay.tool("get_session", session_id=session_id)
            answered_listen = [m for m in relay.received if m.get("id") == listen["id"] and "method" not in m]
    assert ack["params"]["notifications"]["resourceSubscriptions"] == [uri]
    assert run["structuredContent"]["status"] == "completed"
    assert update["params"]["uri"] == uri
    assert answered_listen == []  # cancelled by closing its stream, and answered by nobody
    assert after["structuredContent"]["session_id"] == session_id


class CuttingForwarder:
    """A TCP forwarder to the daemon that can cut the GET streams through it and hold back new ones."""

    def __init__(self, port: int) -> None:
        self._port = port
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self._server.getsockname()[1]}/mcp"
        self.gets: list[bytes] = []
        """The request head of each GET through the forwarder, in order."""
        self.release = threading.Event()
        self.holding = False
        self._streams: list[socket.socket] = []
        self._done = threading.Event()
        self._threads = [threading.Thread(target=self._accept, daemon=True)]

    def cut_gets(self) -> None:
        for sock in self._streams:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._streams.clear()

    def _accept(self) -> None:
        while not self._done.is_set():
            try:
                conn, _ = self._server.accept()
            except TimeoutError:
                continue
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            first = conn.recv(65536)
            upstream = socket.create_connection(("127.0.0.1", self._port))
            with upstream:
                if first.startswith(b"GET "):
                    self.gets.append(first)
                    if self.holding:
                        self.release.wait(30)
                    self._streams += [conn, upstream]
                upstream.sendall(first)
                back = threading.Thread(target=_pipe, args=(upstream, conn), daemon=True)
                back.start()
                _pipe(conn, upstream)
                back.join(30)

    @contextlib.contextmanager
    def running(self) -> Iterator[CuttingForwarder]:
        self._threads[0].start()
        try:
            yield self
        finally:
            self._done.set()
            self.release.set()
            self.cut_gets()
            self._threads[0].join(5)
            self._server.close()


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


def updates(relay: RawRelay) -> list[dict[str, Any]]:
    return [m for m in relay.received if m.get("method") == UPDATED]


async def until(check: Callable[[], bool], what: Callable[[], str], timeout_s: float = 15.0) -> None:
    deadline = anyio.current_time() + timeout_s
    while True:  # what it checks changes in other threads (the forwarder's) as well as in ours
        if check():
            return
        assert anyio.current_time() < deadline, f"not within {timeout_s:g} s: {what()}"
        await anyio.sleep(0.05)


def port_of(daemon: Daemon) -> int:
    return int(daemon.url.split(":")[2].split("/")[0])


async def test_a_broken_get_stream_is_reopened_with_last_event_id_and_what_was_missed_is_replayed(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    with running_daemon(home, tmp_path) as daemon, CuttingForwarder(port_of(daemon)).running() as forwarder:
        publish(home, forwarder.url, token=daemon.token, pid=daemon.proc.pid)  # the relay finds the forwarder
        with anyio.fail_after(TEST_TIMEOUT_S):
            async with raw_loom_mcp(home, tmp_path) as relay:
                await relay.handshake()
                made = await relay.result(
                    relay.legacy("tools/call", {"name": "create_session", "arguments": {
                        "cwd": str(tmp_path), "model": model(tmp_path, "one", "two")}})
                )  # fmt: skip
                session_id = made["structuredContent"]["session_id"]
                uri = f"loom://sessions/{session_id}/state"
                await relay.result(relay.legacy("resources/subscribe", {"uri": uri}))
                await until(lambda: len(forwarder.gets) >= 1, lambda: "the relay opened the GET stream")
                go = {"name": "send_message", "arguments": {"session_id": session_id, "text": "go", "wait_s": 20}}
                await relay.result(relay.legacy("tools/call", go))
                await until(
                    lambda: len(updates(relay)) >= 1, lambda: f"an update after the first run: {relay.received}"
                )
                await anyio.sleep(0.5)  # the coalesced last one of the run
                forwarder.holding = True
                opened = len(forwarder.gets)
                forwarder.cut_gets()
                await until(
                    lambda: len(forwarder.gets) > opened, lambda: f"the relay reopened the GET stream: {forwarder.gets}"
                )  # held back
                heard_before = len(updates(relay))
                await relay.result(relay.legacy("tools/call", go))  # stored for the stream while it is down
                await anyio.sleep(1.0)
                held = len(updates(relay))
                forwarder.release.set()
                await until(
                    lambda: len(updates(relay)) > held, lambda: f"the replay: {forwarder.gets}\n{relay.stderr()}"
                )
                assert relay.process.stdin is not None
                await relay.process.stdin.aclose()
                started = time.monotonic()
                with anyio.fail_after(10):
                    await relay.process.wait()
                exited_s = time.monotonic() - started
                stderr = relay.stderr()
    reopened = forwarder.gets[opened].decode("latin-1").lower()
    assert held == heard_before  # nothing reached the caller while the stream was down
    assert "mcp-session-id: " in reopened and "last-event-id: " in reopened
    assert all(u["params"]["uri"] == uri for u in updates(relay))
    assert exited_s < 5 and "Traceback" not in stderr


def test_the_last_event_id_is_kept_across_events_and_an_empty_priming_event_is_no_message() -> None:
    stream = io.BytesIO(b'id: 7\ndata: \n\ndata: {"a": 1}\n\nid: 9\ndata: {"b": 2}\n\nid: x\0y\ndata: {}\n\n')
    assert list(events_with_ids(stream)) == [('{"a": 1}', "7"), ('{"b": 2}', "9"), ("{}", "9")]


@contextlib.contextmanager
def get_answering(status: int) -> Iterator[tuple[str, list[str]]]:
    """A plain HTTP server answering every GET with ``status`` (200: an SSE stream that stays open)."""
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("Mcp-Session-Id", ""))
            self.send_response(status)
            if status != 200:
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            self.wfile.write(b'id: 1\ndata: {"jsonrpc": "2.0", "method": "notifications/message"}\n\n')
            self.wfile.flush()
            time.sleep(30)  # open until the relay cuts it

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/mcp", seen
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("status", [405, 404])
def test_a_daemon_without_the_get_stream_or_the_session_is_asked_once(status: int) -> None:
    with get_answering(status) as (url, seen):
        upstream = Upstream(Endpoint.parse(url), "token", connect_timeout_s=2.0)
        stream = Standalone(upstream, {"Mcp-Session-Id": "s1"}, lambda message: None)
        stream.start()
        deadline = time.monotonic() + 5
        while stream.running and time.monotonic() < deadline:
            time.sleep(0.05)
        running = stream.running
        time.sleep(0.6)  # longer than the first pause: a retry would have come by now
    assert (running, seen) == (False, ["s1"])


def test_stopping_cuts_an_open_get_stream_at_once() -> None:
    relayed: list[dict[str, Any]] = []
    with get_answering(200) as (url, seen):
        upstream = Upstream(Endpoint.parse(url), "token", connect_timeout_s=2.0)
        stream = Standalone(upstream, {"Mcp-Session-Id": "s1"}, relayed.append)
        stream.start()
        deadline = time.monotonic() + 5
        while not relayed and time.monotonic() < deadline:
            time.sleep(0.05)
        started = time.monotonic()
        stream.stop(wait_s=5)
        stopped_s = time.monotonic() - started
    assert relayed == [{"jsonrpc": "2.0", "method": "notifications/message"}]
    assert stream.last_event_id == "1" and not stream.running and stopped_s < 1


def aside_daemon() -> MCPServer:
    """A daemon stand-in whose tools send the caller a notification and a request outside any request."""
    daemon = MCPServer("aside-daemon")

    @daemon.tool()
    async def announce(ctx: Context) -> str:
        await ctx.session.send_resource_list_changed()  # no related request: the GET stream carries it
        return "announced"

    @daemon.tool()
    async def ping_caller(ctx: Context) -> str:
        try:
            with anyio.fail_after(10):
                await ctx.session.send_ping()  # a request of the daemon's: the caller's answer must come back
        except TimeoutError:
            return "the caller's answer never came back"
        return "the caller answered"

    return daemon


async def test_the_daemons_own_notifications_and_requests_reach_a_2025_era_caller_and_its_answer_goes_back(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    changed = anyio.Event()

    async def on_message(message: object) -> None:
        if isinstance(message, mt.ResourceListChangedNotification):
            changed.set()

    with daemon_like(home, static(aside_daemon())), anyio.fail_after(TEST_TIMEOUT_S):
        async with legacy_client(home, tmp_path, on_message) as client:
            with anyio.move_on_after(10):
                while not changed.is_set():  # until the relay's GET stream is open
                    await client.call_tool("announce", {})
                    with anyio.move_on_after(0.2):
                        await changed.wait()
            asked = await client.call_tool("ping_caller", {})
    assert changed.is_set()
    assert (asked.structured_content, asked.is_error) == ({"result": "the caller answered"}, False)
