"""A stand-in for the Loom daemon: an MCP server over streamable HTTP on real uvicorn, behind a token.

It publishes itself the way the daemon does (``$LOOM_HOME/daemon.json`` with its URL and pid, the
token in ``$LOOM_HOME/daemon.token``), so ``loom mcp`` finds it and attaches to it. The server runs
in uvicorn's thread and event loop; what it serves is opened in the app's lifespan, in that loop.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Mount
from starlette.types import ASGIApp, Receive, Scope, Send

from orchestrator.face.server import build_face
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.host import SessionHost
from tests.orchestrator.models.live_server import serve

TOKEN = "test-token-0123456789"

ServerOpener = Callable[[], AbstractAsyncContextManager[MCPServer]]


@contextlib.asynccontextmanager
async def _face(home: Path) -> AsyncIterator[MCPServer]:
    async with embedded_runtime(home) as runtime, SessionHost(runtime) as host:
        yield build_face(host)


def face_of(home: Path) -> ServerOpener:
    """Open Loom's real face over an embedded runtime on ``home``, as the daemon does."""
    return lambda: _face(home)


def static(server: MCPServer) -> ServerOpener:
    """Serve an MCP server that needs nothing opened."""

    @contextlib.asynccontextmanager
    async def opened() -> AsyncIterator[MCPServer]:
        yield server

    return opened


def publish(home: Path, url: str, token: str = TOKEN, pid: int | None = None) -> None:
    """Write the daemon's discovery file and token file (owner-only), as ``loom serve`` does."""
    home.mkdir(parents=True, exist_ok=True)
    body = {"url": url, "pid": os.getpid() if pid is None else pid, "started": time.time()}
    (home / "daemon.json").write_text(json.dumps(body), encoding="utf-8")
    token_file = home / "daemon.token"
    token_file.write_text(token + "\n", encoding="ascii")
    token_file.chmod(0o600)


def unpublish(home: Path) -> None:
    """Remove the discovery file, as a daemon does when it stops."""
    (home / "daemon.json").unlink(missing_ok=True)


@contextlib.contextmanager
def daemon_like(home: Path, open_server: ServerOpener, token: str = TOKEN) -> Iterator[str]:
    """Serve ``open_server()``'s MCP app at ``/mcp`` behind ``token``, published in ``home``; yields the URL.

    Leaving the block removes the discovery file first, then stops the server.
    """
    served: dict[str, ASGIApp] = {}

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with open_server() as server:
            served["mcp"] = server.streamable_http_app(streamable_http_path="/mcp")
            async with server.session_manager.run():
                yield

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope.get("headers", []))
        if scope["type"] == "http" and headers.get(b"authorization") != f"Bearer {token}".encode():
            await JSONResponse({"error": "invalid_token"}, status_code=401)(scope, receive, send)
            return
        await served["mcp"](scope, receive, send)

    app = Starlette(routes=[Mount("/", app=guarded)], lifespan=lifespan)
    with serve(app, lifespan=True) as origin:
        url = f"{origin}/mcp"
        publish(home, url, token)
        try:
            yield url
        finally:
            unpublish(home)
