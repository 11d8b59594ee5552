"""Run an ASGI app under real uvicorn on 127.0.0.1, on a port the OS picks.

The server runs in a daemon thread with its own event loop, so it works from sync fixtures and from
async tests alike and never competes with the test's event loop. Reused by the fake model providers
and by end-to-end tests of the CLI.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from starlette.types import ASGIApp


@contextmanager
def serve(app: ASGIApp, *, startup_timeout_s: float = 10.0, lifespan: bool = False) -> Iterator[str]:
    """Serve ``app`` until the block exits; yields its origin, e.g. ``http://127.0.0.1:54321``.

    ``lifespan=True`` runs the app's lifespan (an MCP streamable-HTTP app needs it for its session manager).
    """
    # Binding the socket ourselves gives the port before the server starts, with no race.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port: int = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        lifespan="on" if lifespan else "off",
        access_log=False,
        log_config=None,  # leave the test process's logging configuration alone
        log_level="warning",
        # Short keep-alive/graceful windows keep shutdown quick when a client holds a connection.
        timeout_keep_alive=1,
        timeout_graceful_shutdown=1,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name=f"uvicorn:{port}", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + startup_timeout_s
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"uvicorn on port {port} did not start")
            time.sleep(0.005)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=5)
        sock.close()


def closed_port_url() -> str:
    """An http origin on 127.0.0.1 where nothing listens, so connecting is refused at once."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"
