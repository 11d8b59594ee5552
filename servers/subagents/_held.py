"""One client of Loom's face held for a server's lifetime, opened on its first use and again after it breaks.

Opening a client of the daemon costs about 200 ms (an HTTP client, the MCP handshake), more than the child it
would start; a server that opened one per tool call made a child cost ten plain sessions. So the server holds
one, shared by its tool calls (an MCP client takes concurrent calls). The connection is entered and left by a
task of its own in the server's lifespan task group (anyio requires a context to be left by the task that
entered it), never by the tool call that first needed it. Outside a running server (a `SubagentTools` used
directly) each use opens a client of its own.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager

import anyio
import anyio.abc

from clients.loom import LoomClient

__all__ = ["HeldClient"]

CLOSE_TIMEOUT_S = 5.0
"""How long a held connection may take to close when the server stops, before it is cancelled."""

_log = logging.getLogger(__name__)


class HeldClient:
    """The face's client a server's tool calls share.

    Args:
        connect: opens a client of Loom's face.
    """

    def __init__(self, connect: Callable[[], AbstractAsyncContextManager[LoomClient]]) -> None:
        self._connect = connect
        self._group: anyio.abc.TaskGroup | None = None
        self._client: LoomClient | None = None
        self._gone: anyio.Event | None = None
        self._opening = anyio.Lock()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The server's lifespan: while it runs, tool calls share one client; after, the client is closed."""
        async with anyio.create_task_group() as group:
            self._group = group
            try:
                yield
            finally:
                self._group = None
                self.forget()
                # The holder leaves its connection in its own task; one that hangs on the way out is cut.
                group.cancel_scope.deadline = anyio.current_time() + CLOSE_TIMEOUT_S

    async def _hold(self, *, task_status: anyio.abc.TaskStatus[LoomClient]) -> None:
        gone = anyio.Event()
        opened = False
        try:
            async with self._connect() as loom:
                self._client, self._gone, opened = loom, gone, True
                task_status.started(loom)
                await gone.wait()
        except Exception as exc:  # a connection that broke while held (or on its way out): the next call opens another
            if not opened:
                raise  # start() raises it in the tool call that asked, and the server goes on
            _log.warning("the subagents server's connection to Loom ended: %r", exc)
        finally:
            if self._gone is gone:
                self._client, self._gone = None, None

    def forget(self) -> None:
        """Close the held client (it failed a call: the next one gets a new connection)."""
        if self._gone is not None:
            self._gone.set()
        self._client, self._gone = None, None

    @contextlib.asynccontextmanager
    async def client(self) -> AsyncIterator[LoomClient]:
        """The shared client (opened now if there is none), or one of its own outside a running server."""
        if self._group is None:
            async with self._connect() as loom:
                yield loom
            return
        async with self._opening:
            held = self._client
            loom = held if held is not None else await self._group.start(self._hold)
        yield loom
