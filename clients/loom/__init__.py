"""Loom's client library: how every Loom client (the CLI, the TUI, the subagents server, scripts) reaches a runtime.

::

    from clients.loom import open_client

    async with open_client() as loom:
        session = await loom.create_session("/path/to/project", mode="ask")
        run = await loom.send_message(session.session_id, "Summarise the README")
        async for event in loom.follow(session.session_id):
            ...  # stored events, and text_delta events as the model writes

:func:`open_client` connects to the daemon when one runs for the home (``loom serve``), so the client
sees and drives the sessions every other client does; otherwise it opens Loom's face in this process
(:mod:`orchestrator.face.local`). Either way the calls are the face's MCP tools, typed
(:class:`~clients.loom.client.LoomClient`), and their results the models of :mod:`orchestrator.protocol`.

Besides the protocol types, this package imports only the configuration loader, the in-process face's
factory and the daemon's address book (``tests/clients/test_client_imports.py`` holds it to that).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from clients.loom.client import FaceError, LoomClient
from clients.loom.follow import LiveFollower
from orchestrator.config import loom_home

__all__ = ["FaceError", "LiveFollower", "LoomClient", "daemon_running", "open_client"]


def daemon_running(home: Path | None = None) -> bool:
    """Whether a daemon runs for ``home`` (default ``$LOOM_HOME``): :func:`open_client` would then attach to it."""
    from orchestrator.daemon.discovery import read_discovery

    return read_discovery(home or loom_home()) is not None


@contextlib.asynccontextmanager
async def open_client(
    home: Path | None = None,
    *,
    cwd: Path | None = None,
    config_path: Path | None = None,
    shared: bool = False,
    client_name: str = "loom",
    require_daemon: bool = False,
) -> AsyncIterator[LoomClient]:
    """A client of the daemon's face if a daemon runs for ``home``, else of a face in this process.

    Args:
        home: the Loom home (default ``$LOOM_HOME``, else ``~/.loom``).
        cwd: the directory whose project configuration an in-process face reads (default: the current one).
        config_path: one more configuration file for an in-process face (a daemon has its own configuration).
        shared: an in-process face that writes only the sessions this client creates (``loom run``), so that
            other such processes may run beside it; otherwise it holds the home alone.
        client_name: the ``clientInfo`` name the face records (approvals decided through this client say so).
        require_daemon: never open a face in this process (a TUI: closing it must not end a run, and several
            must see one session); without a daemon, raise :class:`~clients.loom.daemon.DaemonNotRunning`.

    Raises:
        orchestrator.config.ConfigError: the configuration an in-process face would use is invalid.
        orchestrator.face.local.CannotOpen: no daemon runs and this process cannot run Loom (another process
            runs sessions on the home: start ``loom serve``; or the store cannot be opened).
        orchestrator.daemon.auth.TokenError: a daemon runs but its token cannot be read.
        clients.loom.daemon.DaemonNotRunning: ``require_daemon`` and no daemon runs.
    """
    from mcp import Client
    from mcp import types as mt

    from clients.loom.daemon import connect
    from orchestrator.face.local import local_face
    from servers._version import loom_version

    home = home or loom_home()
    info = mt.Implementation(name=client_name, version=loom_version())
    if require_daemon or daemon_running(home):
        async with connect(home, client_info=info) as session:
            yield LoomClient(session, on_daemon=True)
        return
    async with (
        local_face(home, cwd=cwd, config_path=config_path, shared=shared) as face,
        Client(face, client_info=info) as session,
    ):
        yield LoomClient(session, on_daemon=False)
