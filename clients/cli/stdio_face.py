"""``loom mcp``: Loom's MCP face over stdio, the command another agent puts in its ``mcp.json``.

If a daemon (``loom serve``) is running for this ``LOOM_HOME``, attach to it, so that every client
sees the same sessions: :mod:`clients.relay` passes each message on to it. That path imports the
standard library only (no MCP SDK, httpx, pydantic or anyio: about a second at every spawn), so it is
decided before anything else is imported. Otherwise run an embedded runtime in this process and serve
the face directly. One process at a time may run sessions on a home: while another embedded runtime
holds it, this one refuses and says to start ``loom serve``, which every client then shares.

When Loom cannot run (a bad config, the home in use, a store that will not open, a daemon that refuses
us), ``loom mcp`` still answers the handshake and lists the face's tools, and every tool call returns the
reason and what to do, so that the client shows that rather than "Connection closed". It exits (1, or 2
for a bad config) when the client disconnects.

Nothing but protocol may reach stdout. Logging goes to stderr, configured before any ``MCPServer``
exists (its constructor would otherwise install its own handler). The wire (:func:`servers._stdio.stdio_wire`,
waited on by the event loop rather than through worker threads) points fd 1 at stderr while it is open, and
the session host (whose tools run child processes) lives entirely inside it; afterwards fd 1 is pointed at
stderr again for the rest of the process, so that nothing flushed at exit lands on the wire either.

SIGTERM and SIGINT end serving the way a closed stdin does: the runtime then closes normally and runs
still going are recorded as interrupted (attached, the relay ends the daemon session it opened).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from clients.cli.exits import EXIT_FAILED, EXIT_OK, EXIT_USAGE

if TYPE_CHECKING:
    import anyio
    from mcp.server import Server

logger = logging.getLogger("loom.mcp")

T = TypeVar("T")

DAEMON_START_S = 10.0
"""How long to wait for a daemon that holds the home but does not listen yet (starting, or stopping)."""


def _fail(message: str, code: int) -> int:
    sys.stderr.write(f"loom mcp: error: {message}\n")
    return code


def _log_to_stderr() -> None:
    name = os.environ.get("LOOM_LOG_LEVEL", "WARNING").strip().upper()
    level = logging.getLevelName(name)
    logging.basicConfig(
        level=level if isinstance(level, int) else logging.WARNING,
        stream=sys.stderr,
        format="%(levelname)s %(name)s: %(message)s",
    )
    if not isinstance(level, int):
        logger.warning("LOOM_LOG_LEVEL=%r is not a log level; using WARNING", name)


def _keep_stdout_off_wire() -> None:
    # Shutdown (tools ending, buffered output flushed at exit) must not write into the protocol stream.
    try:
        os.dup2(sys.stderr.fileno(), 1)
    except (OSError, ValueError):
        pass


def run_stdio_face(args: argparse.Namespace) -> int:
    """Serve Loom's MCP face over stdio until the client closes stdin (or SIGTERM/SIGINT).

    Returns:
        0 after a clean end; 1 if Loom could not run (the daemon refuses us, the home is in use, the store
        cannot be opened); 2 for a bad config. Either way the client is answered until it disconnects.
    """
    _log_to_stderr()
    from orchestrator.home import loom_home

    try:
        return _attach_or_embed(loom_home())
    finally:
        _keep_stdout_off_wire()


def _attach_or_embed(home: Path) -> int:
    from clients.relay import DaemonGone, DaemonRefused, probe, relay_stdio
    from orchestrator.daemon import read_discovery

    deadline = time.monotonic() + DAEMON_START_S
    while True:
        found = read_discovery(home)
        if found is not None:
            try:
                upstream = probe(home, found)
            except DaemonRefused as exc:
                # Running beside a live daemon would split the sessions between two runtimes.
                reason = f"{exc}. Not starting an embedded runtime beside a running daemon"
                return _run_async(_refuse, home, reason, EXIT_FAILED)
            except DaemonGone as exc:
                logger.warning("%s; its discovery file is stale, so running an embedded runtime instead", exc)
            else:
                relay_stdio(home, found, upstream)
                return EXIT_OK
        # A daemon starting (not listening yet) or stopping holds the home: attach to it, or embed once it is gone.
        code = _run_async(_serve_embedded, home, time.monotonic() < deadline)
        if code is not None:
            return code
        time.sleep(0.1)


def _run_async(serve: Callable[..., Awaitable[T]], home: Path, *args: Any) -> T:
    """Run ``serve(home, *args, serving)`` under anyio, with SIGTERM/SIGINT ending ``serving``."""
    import anyio

    async def main() -> T:
        serving = anyio.CancelScope()
        async with anyio.create_task_group() as tg:
            tg.start_soon(_stop_serving_on_signal, serving)
            code = await serve(home, *args, serving)
            tg.cancel_scope.cancel()
        return code

    return anyio.run(main)


async def _stop_serving_on_signal(serving: anyio.CancelScope) -> None:
    import anyio

    # A signal ends serving as a closed stdin does: what serves then closes uncancelled, so runs still
    # going are recorded as interrupted. Watching on through that shutdown keeps a second signal from
    # killing the process halfway.
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for _ in signals:
            serving.cancel()


def _exit_if_stopped_by_signal(serving: anyio.CancelScope) -> None:
    """After a signal, exit once everything that keeps state is closed, without leaving ``stdio_server``.

    The client may still hold our stdin open; where stdin is not a pipe (a terminal), the SDK's stdin reader
    is then a thread blocked in read() that neither cancellation nor interpreter shutdown ends, so leaving
    normally would hang.
    """
    if serving.cancel_called:
        _keep_stdout_off_wire()
        logging.shutdown()
        sys.stderr.flush()
        os._exit(EXIT_OK)


async def _serve_over_stdio(server: Server[Any], serving: anyio.CancelScope) -> None:
    from servers._stdio import stdio_wire

    async with stdio_wire() as (read, write):
        await _run(server, read, write, serving)
        _exit_if_stopped_by_signal(serving)


async def _run(server: Server[Any], read: Any, write: Any, serving: anyio.CancelScope) -> None:
    with serving:
        await server.run(read, write, server.create_initialization_options())


async def _serve_embedded(home: Path, wait_for_daemon: bool, serving: anyio.CancelScope) -> int | None:
    """Serve the face over a runtime of our own; an unusable config or store is answered with :func:`_refuse`.

    Returns:
        The exit code; or None when ``wait_for_daemon`` and a daemon (``loom serve``) holds the home, starting
        or stopping, so that the caller looks for it again.
    """
    from orchestrator.face.local import CannotOpen, ConfigError, open_runtime
    from servers._stdio import stdio_wire

    try:
        # The runtime first (a failure is answered before any protocol), then stdio, then the face's session
        # host, so that the host is closed (runs recorded) before the wire is given back.
        async with open_runtime(home) as local:
            async with stdio_wire() as (read, write):
                async with local.face() as face:
                    # What MCPServer.run_stdio_async does, over streams we own; the low-level server has no
                    # public accessor in SDK 2.3.0 (the SDK's own Client reaches it the same way).
                    await _run(face._lowlevel_server, read, write, serving)
                _exit_if_stopped_by_signal(serving)
            return EXIT_OK
    except ConfigError as exc:
        reason = (
            f"its configuration is invalid: {exc}. Fix it, then restart Loom's MCP server (reconnect it in your client)"
        )
        return await _refuse(home, reason, EXIT_USAGE, serving)
    except CannotOpen as exc:
        if exc.usage and exc.holder == "loom serve" and wait_for_daemon:
            return None
        return await _refuse(home, str(exc), EXIT_FAILED, serving)


async def _refuse(home: Path, reason: str, code: int, serving: anyio.CancelScope) -> int:
    """Say ``reason`` on stderr, then serve it to the client: the handshake, the face's tools, an error per call.

    A client of a ``loom mcp`` that just exited sees only "Connection closed"; this way its user (or its
    model) reads why Loom cannot run and what to do, in every tool result, until it disconnects.

    Returns:
        ``code``, once the client has closed stdin.
    """
    from clients.mcp_proxy import build_refusal

    _fail(reason, code)
    from orchestrator.face.local import face_tools

    await _serve_over_stdio(build_refusal(reason, await face_tools(home)), serving)
    return code
