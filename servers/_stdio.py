"""The stdio entry shared by Loom's servers and ``loom mcp``: logging off stdout, the wire on the event loop.

The SDK's ``stdio_server`` reads and writes the wire through worker threads: each request costs three thread
hops (read a line, write the answer, flush it), 0.1-0.3 ms each on a loaded machine, on every call a client
makes. :func:`stdio_wire` serves the same protocol over the same descriptors with the event loop waiting on
them instead: while it is open, fd 0 reads the null device and fd 1 writes to stderr (children and stray
prints never touch the wire, as with the SDK), and the wire itself is a private duplicate of each, made
non-blocking. When either end is not a pipe or a socket (a terminal, a file: what a loop cannot wait on, or
a descriptor shared with the user), it is the SDK's own transport.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import stat
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server

__all__ = ["serve_stdio", "stdio_wire"]

_READ_BYTES = 1 << 16


def serve_stdio(name: str, build: Callable[[], MCPServer]) -> int:
    """Build a server and serve it over stdio until the client disconnects.

    Returns:
        0 after a clean end, 2 when ``build`` rejects its arguments (ValueError), 130 on Ctrl-C.
    """
    # Before MCPServer exists: its basicConfig call is then a no-op, and stdout stays reserved for the wire.
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format=f"{name}: %(levelname)s %(name)s: %(message)s")
    try:
        server = build()
    except ValueError as exc:
        print(f"loom server {name}: {exc}", file=sys.stderr)
        return 2

    async def serve() -> None:
        async with stdio_wire() as (read, write):
            # What MCPServer.run_stdio_async does over the SDK's transport (its low-level server has no public
            # accessor in SDK 2.3.0; the SDK's own Client reaches it the same way).
            lowlevel = server._lowlevel_server
            await lowlevel.run(read, write, lowlevel.create_initialization_options())

    try:
        anyio.run(serve)
    except KeyboardInterrupt:
        return 130
    return 0


def _pollable(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class _PipeIn:
    """The wire's read end as the SDK's transport reads it: an async iterator of text lines."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    async def __aiter__(self) -> AsyncIterator[str]:
        pending = b""
        while True:
            await anyio.wait_readable(self._fd)
            try:
                chunk = os.read(self._fd, _READ_BYTES)
            except BlockingIOError:
                continue
            if not chunk:
                break
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                yield line.decode("utf-8", errors="replace") + "\n"
        if pending:
            yield pending.decode("utf-8", errors="replace")


class _PipeOut:
    """The wire's write end as the SDK's transport writes it: whole messages, written before ``write`` returns."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    async def write(self, text: str) -> None:
        view = memoryview(text.encode("utf-8"))
        while view:
            try:
                view = view[os.write(self._fd, view) :]
            except BlockingIOError:
                await anyio.wait_writable(self._fd)

    async def flush(self) -> None:
        """Nothing is buffered: :meth:`write` has handed every byte to the pipe."""


@contextlib.contextmanager
def _claimed(fd: int, diversion: int) -> Any:
    """A non-blocking private duplicate of ``fd``, with ``fd`` itself pointed at ``diversion`` meanwhile."""
    private = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)  # never in the standard range, never inherited
    try:
        os.dup2(diversion, fd)
        try:
            blocking = os.get_blocking(private)
            os.set_blocking(private, False)
            try:
                yield private
            finally:
                os.set_blocking(private, blocking)  # the pipe may outlive us in another process that shares it
        finally:
            os.dup2(private, fd)
    finally:
        os.close(private)


@contextlib.asynccontextmanager
async def stdio_wire() -> AsyncIterator[tuple[Any, Any]]:
    """The read and write streams of an MCP server over this process's stdin and stdout (see the module)."""
    if not (_pollable(0) and _pollable(1)):
        async with stdio_server() as streams:
            yield streams
        return
    with contextlib.ExitStack() as stack:
        null = os.open(os.devnull, os.O_RDONLY)
        stack.callback(os.close, null)
        wire_in = stack.enter_context(_claimed(0, null))
        wire_out = stack.enter_context(_claimed(1, 2))
        async with stdio_server(stdin=_PipeIn(wire_in), stdout=_PipeOut(wire_out)) as streams:  # type: ignore[arg-type]
            yield streams
