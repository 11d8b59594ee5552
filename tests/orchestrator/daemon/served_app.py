"""The daemon's app (:func:`orchestrator.daemon.app.build_app`) under real uvicorn on a loopback port."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import uvicorn
from mcp.server.mcpserver import MCPServer

from orchestrator.daemon.app import build_app
from orchestrator.daemon.resume import BoundedEventStore
from orchestrator.daemon.runner import HOST, bind


class QuietServer(uvicorn.Server):
    """uvicorn without its signal handlers (they belong to pytest), telling us once it listens."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.listening = anyio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        self.listening.set()


@contextlib.asynccontextmanager
async def served(
    face: MCPServer, token: str, *, token_file: Path | None = None, event_store: BoundedEventStore | None = None
) -> AsyncIterator[str]:
    """Serve ``face`` as the daemon does for the block; yields the origin ``http://127.0.0.1:PORT``."""
    with bind(0) as sock:
        origin = f"http://{HOST}:{sock.getsockname()[1]}"
        app = build_app(face, token, token_file=token_file, event_store=event_store)
        server = QuietServer(uvicorn.Config(app, lifespan="on", log_config=None, access_log=False))
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, [sock])
            with anyio.fail_after(10):
                await server.listening.wait()
            try:
                yield origin
            finally:
                server.should_exit = True
