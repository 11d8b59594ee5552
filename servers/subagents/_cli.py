"""``loom server subagents [--parent SESSION]``: the subagents tools over stdio, driving the running daemon.

Children are sessions of the daemon (``loom serve``), so they outlive this process and every client sees them;
without a daemon there is nothing to start them in, and the command says so rather than running one itself.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import anyio

from clients.loom import FaceError, LoomClient, daemon_running, open_client
from orchestrator.home import loom_home
from servers._stdio import serve_stdio

__all__ = ["run"]


class _Daemon:
    """Opens a client of the daemon for ``home`` (the server holds one, and opens another after a failure)."""

    def __init__(self, home: Path) -> None:
        self.home = home

    def __call__(self) -> contextlib.AbstractAsyncContextManager[LoomClient]:
        return open_client(self.home, require_daemon=True, client_name="loom-subagents")

    @contextlib.asynccontextmanager
    async def tasks(self) -> AsyncIterator[LoomClient]:
        """A client of the daemon that declares the tasks extension (spawn and send then answer with a task)."""
        from mcp import types as mt

        from clients.loom.daemon import connect
        from servers._version import loom_version
        from servers.subagents._tasks import TaskResults

        info = mt.Implementation(name="loom-subagents", version=loom_version())
        async with connect(self.home, client_info=info, extensions=[TaskResults()]) as client:
            yield LoomClient(client, on_daemon=True)


async def _check_parent(connect: _Daemon, parent: str) -> str | None:
    """Why ``parent`` cannot be the children's parent, or None."""
    async with connect() as loom:
        try:
            await loom.get_session(parent)
        except FaceError as exc:  # caught inside: raised through the connection it would come out wrapped
            return str(exc)
    return None


def run(argv: Sequence[str] | None = None) -> int:
    """Serve the subagents tools over stdio.

    Returns:
        0 after a clean end; 2 when no daemon runs or the parent is unknown; 130 on Ctrl-C.
    """
    from servers.subagents._server import build_server

    parser = argparse.ArgumentParser(
        prog="loom server subagents",
        description="Serve the subagents tools (spawn, wait, result, send, cancel) over MCP stdio, on the daemon.",
    )
    parser.add_argument(
        "--parent",
        metavar="SESSION",
        help="the session whose children to start and manage (default: top-level sessions in this directory)",
    )
    args = parser.parse_args(argv)
    home = loom_home()
    if not daemon_running(home):
        print(
            f"loom server subagents: no Loom daemon is running for {home}; start `loom serve` first",
            file=sys.stderr,
        )
        return 2
    connect = _Daemon(home)
    if args.parent:
        problem = anyio.run(_check_parent, connect, args.parent)
        if problem is not None:
            print(f"loom server subagents: --parent {args.parent}: {problem}", file=sys.stderr)
            return 2
    cwd = Path.cwd()
    return serve_stdio(
        "subagents",
        lambda: build_server(connect, session_id=args.parent, cwd=cwd, home=home, project=cwd, tasks=connect.tasks),
    )
