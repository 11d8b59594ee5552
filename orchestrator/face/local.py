"""The in-process face: Loom's MCP face over a runtime in this process, for a client when no daemon runs.

This is the one factory a client uses to run Loom itself (:mod:`clients.loom` connects to it when no
``loom serve`` runs for the home). It opens in two steps, so that a stdio server (``loom mcp``) can sit
between the runtime and the sessions: :func:`open_runtime` takes the home's lock and opens the store (a
failure is known before any protocol is spoken), then :meth:`LocalRuntime.face` opens the session host
and builds the face over it; leaving it closes every session and records the runs still going as
interrupted. :func:`local_face` does both at once.

Importing this module costs nothing: the runtime and the MCP SDK are imported when a face is opened.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.config import ConfigError, LoomConfig, load_config

if TYPE_CHECKING:
    from mcp import types as mt
    from mcp.server.mcpserver import MCPServer

    from orchestrator.runtime.runtime import Runtime

__all__ = ["CannotOpen", "ConfigError", "LocalRuntime", "face_tools", "local_face", "open_runtime"]


class CannotOpen(Exception):
    """Loom cannot run in this process; the message says why and what to do.

    Attributes:
        usage: the user can fix it (another process runs sessions on the home: start ``loom serve``);
            otherwise the store failed.
        holder: for a home in use, the command holding it (``loom serve`` while a daemon starts or stops).
    """

    def __init__(self, message: str, *, usage: bool, holder: str = "") -> None:
        super().__init__(message)
        self.usage = usage
        self.holder = holder


@dataclass
class LocalRuntime:
    """A runtime opened in this process: the store and the home's lock, no session yet."""

    runtime: Runtime
    config: LoomConfig

    @contextlib.asynccontextmanager
    async def face(self) -> AsyncIterator[MCPServer]:
        """The face over a session host of this runtime; leaving it closes the sessions and their runs."""
        from orchestrator.face.server import build_face
        from orchestrator.runtime.host import SessionHost

        async with SessionHost(self.runtime, limits=self.config.sessions) as host:
            yield build_face(host)


@contextlib.asynccontextmanager
async def open_runtime(
    home: Path, *, cwd: Path | None = None, config_path: Path | None = None, shared: bool = False
) -> AsyncIterator[LocalRuntime]:
    """Open a runtime on ``home`` with the configuration ``cwd`` (default: the current directory) sees.

    Args:
        home: the Loom home whose store, lock and configuration to use.
        cwd: the directory whose project configuration applies.
        config_path: one more configuration file over the user's and the project's (``loom run --config``).
        shared: this process writes only the sessions it creates (``loom run``), so other such processes may
            run beside it; otherwise it holds the home alone, as a face serving every session must.

    Raises:
        ConfigError: the configuration is invalid (the message names the file).
        CannotOpen: another process runs sessions on the home, or the store cannot be opened.
    """
    from orchestrator.runtime.embedded import embedded_runtime
    from orchestrator.runtime.lock import HomeInUse
    from orchestrator.store.interface import StoreError

    config = load_config(home, cwd or Path.cwd(), config_path)
    async with contextlib.AsyncExitStack() as stack:
        try:
            runtime = await stack.enter_async_context(embedded_runtime(home, config=config, shared=shared))
        except HomeInUse as exc:
            raise CannotOpen(str(exc), usage=True, holder=exc.command) from exc
        except StoreError as exc:
            raise CannotOpen(str(exc), usage=False) from exc
        yield LocalRuntime(runtime, config)


@contextlib.asynccontextmanager
async def local_face(
    home: Path, *, cwd: Path | None = None, config_path: Path | None = None, shared: bool = False
) -> AsyncIterator[MCPServer]:
    """:func:`open_runtime`, then its face: what a client talks to when no daemon runs.

    Raises:
        ConfigError: the configuration is invalid.
        CannotOpen: another process runs sessions on the home, or the store cannot be opened.
    """
    async with open_runtime(home, cwd=cwd, config_path=config_path, shared=shared) as local, local.face() as face:
        yield face


async def face_tools(home: Path) -> list[mt.Tool]:
    """The face's tools, from a face over a runtime that is never opened (nothing is read, written or locked)."""
    from orchestrator.face.server import build_face
    from orchestrator.home import DB_NAME
    from orchestrator.runtime.host import SessionHost
    from orchestrator.runtime.runtime import Runtime
    from orchestrator.store.checkpoints import CheckpointStore
    from orchestrator.store.eventlog import EventLog

    unopened = Runtime(EventLog(CheckpointStore(home / DB_NAME)), home=home)
    return await build_face(SessionHost(unopened)).list_tools()
