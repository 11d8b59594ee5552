"""Kept-alive connections to the daemon are answered at once: TCP_NODELAY on accepted sockets, a fast /health.

With Nagle's algorithm on, a response written in two parts (headers, then body) waits for the client's
delayed ACK, about 40 ms, on every request of a kept-alive connection; a fresh connection does not show it.
asyncio sets TCP_NODELAY on an accepted socket only when the listening one says it is TCP, which is why
:func:`orchestrator.daemon.runner.bind` creates it with ``IPPROTO_TCP``.
"""

from __future__ import annotations

import contextlib
import socket
import statistics
import time
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import httpx2
import pytest
import uvicorn
from mcp.server.mcpserver import MCPServer

from orchestrator.daemon.app import build_app
from orchestrator.daemon.runner import HOST, bind
from tests.orchestrator.daemon.daemon_process import http, running_daemon
from tests.orchestrator.daemon.served_app import QuietServer

pytestmark = pytest.mark.anyio

TOKEN = "t0ken"
FAST_S = 0.02
"""Half of a delayed ACK: a kept-alive request slower than this waited for one."""


@contextlib.asynccontextmanager
async def served_as_the_daemon_serves() -> AsyncIterator[tuple[QuietServer, str]]:
    """The daemon's app under real uvicorn, on a socket from the daemon's own ``bind``; (server, origin)."""
    with bind(0) as sock:
        origin = f"http://{HOST}:{sock.getsockname()[1]}"
        app = build_app(MCPServer("echo"), TOKEN)
        server = QuietServer(uvicorn.Config(app, lifespan="on", log_config=None, access_log=False))
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, [sock])
            with anyio.fail_after(10):
                await server.listening.wait()
            try:
                yield server, origin
            finally:
                server.should_exit = True


def accepted_sockets(server: uvicorn.Server) -> list[socket.socket]:
    """The server side of every connection uvicorn holds open."""
    found = []
    for protocol in server.server_state.connections:
        transport = getattr(protocol, "transport", None)
        sock = transport.get_extra_info("socket") if transport is not None else None
        if sock is not None:
            found.append(sock)
    return found


async def test_the_daemons_accepted_sockets_have_tcp_nodelay_set() -> None:
    async with served_as_the_daemon_serves() as (server, origin), http(TOKEN) as client:
        for _ in range(2):  # the second request travels on the connection the first one opened
            assert (await client.get(f"{origin}/health")).status_code == 200
        nodelay = [sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) for sock in accepted_sockets(server)]
    # Asserted outside the server's task group, so that a failure reads as itself, not as an ExceptionGroup.
    assert len(nodelay) == 1 and nodelay[0] != 0, f"TCP_NODELAY on the accepted sockets: {nodelay}"


def test_a_kept_alive_health_request_to_loom_serve_is_answered_at_once(tmp_path: Path) -> None:
    with (
        running_daemon(tmp_path / "home", tmp_path) as daemon,
        httpx2.Client(headers={"Authorization": f"Bearer {daemon.token}"}, trust_env=False, timeout=10) as client,
    ):
        url = f"{daemon.origin}/health"
        assert client.get(url).json()["ok"] is True  # opens the connection the rest reuse
        took = []
        for _ in range(20):
            started = time.perf_counter()
            response = client.get(url)
            took.append(time.perf_counter() - started)
            assert response.status_code == 200
    assert statistics.median(took) < FAST_S, f"kept-alive GET /health took {statistics.median(took) * 1000:.1f} ms"
