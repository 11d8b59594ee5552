"""``loom mcp``: Loom's MCP face over stdio, the command another agent puts in its ``mcp.json``.

If a daemon (``loom serve``) is running for this ``LOOM_HOME``, attach to it, so that every client
sees the same sessions: :mod:`clients.mcp_proxy` forwards each tool call to it. Otherwise run an
embedded runtime in this process and serve the face directly. One process at a time may run sessions
on a home: while another embedded runtime holds it, this one refuses
and says to start ``loom serve``, which every client then shares.

When Loom cannot run (a bad config, the home in use, a store that will not open, a daemon that refuses
us), ``loom mcp`` still answers the handshake and lists the face's tools, and every tool call returns the
reason and what to do, so that the client shows that rather than "Connection closed". It exits (1, or 2
for a bad config) when the client disconnects.

Nothing but protocol may reach stdout. Logging goes to stderr, configured before any ``MCPServer``
exists (its constructor would otherwise install its own handler). The SDK's ``stdio_server`` points
fd 1 at stderr while it is open, and the session host (whose tools run child processes) lives
entirely inside it; afterwards fd 1 is pointed at stderr again for the rest of the process, so that
nothing flushed at exit lands on the wire either.

SIGTERM and SIGINT end serving the way a closed stdin does: the runtime then closes normally and runs
still going are recorded as interrupted.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from clients.cli.exits import EXIT_FAILED, EXIT_OK, EXIT_USAGE

if TYPE_CHECKING:
    from mcp.server import Server

logger = logging.getLogger("loom.mcp")

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
    from orchestrator.config import loom_home

    try:
        return anyio.run(_serve, loom_home())
    finally:
        _keep_stdout_off_wire()


async def _serve(home: Path) -> int:
    serving = anyio.CancelScope()
    async with anyio.create_task_group() as tg:
        tg.start_soon(_stop_serving_on_signal, serving)
        code = await _attach_or_embed(home, serving)
        tg.cancel_scope.cancel()
    return code


async def _stop_serving_on_signal(serving: anyio.CancelScope) -> None:
    # A signal ends serving as a closed stdin does: what serves then closes uncancelled, so runs still
    # going are recorded as interrupted. Watching on through that shutdown keeps a second signal from
    # killing the process halfway.
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for _ in signals:
            serving.cancel()


def _exit_if_stopped_by_signal(serving: anyio.CancelScope) -> None:
    """After a signal, exit once everything that keeps state is closed, without leaving ``stdio_server``.

    The client may still hold our stdin open; the SDK's stdin reader is then a thread blocked in
    read() that neither cancellation nor interpreter shutdown ends, so leaving normally would hang.
    """
    if serving.cancel_called:
        _keep_stdout_off_wire()
        logging.shutdown()
        sys.stderr.flush()
        os._exit(EXIT_OK)


async def _attach_or_embed(home: Path, serving: anyio.CancelScope) -> int:
    from clients.daemon_link import DaemonGone, DaemonLink, DaemonRefused
    from clients.mcp_proxy import build_proxy
    from orchestrator.daemon import read_discovery
    from orchestrator.face.local import CannotOpen

    deadline = anyio.current_time() + DAEMON_START_S
    while True:
        if read_discovery(home) is not None:
            async with DaemonLink(home) as link:
                try:
                    await link.connect()
                except DaemonRefused as exc:
                    # Running beside a live daemon would split the sessions between two runtimes.
                    reason = f"{exc}. Not starting an embedded runtime beside a running daemon"
                    return await _refuse(home, reason, EXIT_FAILED, serving)
                except DaemonGone as exc:
                    logger.warning("%s; its discovery file is stale, so running an embedded runtime instead", exc)
                else:
                    await _serve_over_stdio(build_proxy(link), serving)
                    return EXIT_OK
        try:
            return await _serve_embedded(home, serving)
        except CannotOpen as exc:
            if exc.holder == "loom serve" and anyio.current_time() < deadline:
                # A daemon starting (not listening yet) or stopping: attach to it, or embed once it is gone.
                await anyio.sleep(0.1)
                continue
            return await _refuse(home, str(exc), EXIT_FAILED, serving)


async def _serve_over_stdio(server: Server[Any], serving: anyio.CancelScope) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await _run(server, read, write, serving)
        _exit_if_stopped_by_signal(serving)


async def _run(server: Server[Any], read: Any, write: Any, serving: anyio.CancelScope) -> None:
    with serving:
        await server.run(read, write, server.create_initialization_options())


async def _serve_embedded(home: Path, serving: anyio.CancelScope) -> int:
    """Serve the face over a runtime of our own; an unusable config or store is answered with :func:`_refuse`.

    Raises:
        orchestrator.face.local.CannotOpen: another process runs sessions on ``home`` (``usage`` is set).
    """
    from mcp.server.stdio import stdio_server

    from orchestrator.face.local import CannotOpen, ConfigError, open_runtime

    try:
        # The runtime first (a failure is answered before any protocol), then stdio, then the face's session
        # host, so that the host is closed (runs recorded) before stdio_server exits.
        async with open_runtime(home) as local:
            async with stdio_server() as (read, write):
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
        if exc.usage:
            raise
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
