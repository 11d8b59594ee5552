"""Reaching a running daemon (``loom serve``): its address and token, and an MCP client over its HTTP face.

:func:`clients.loom.open_client` uses it when a daemon runs for the home. ``loom mcp`` attached to a daemon
does not: it relays bytes with the standard library alone (:mod:`clients.relay`), to start in milliseconds.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from orchestrator.daemon.auth import load_token
from orchestrator.daemon.discovery import Discovery, read_discovery

CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 300.0
"""Above the face's longest long-poll (60 s) with room to spare; SSE streams stay open between events."""


class DaemonNotRunning(Exception):
    """No daemon is running for this ``LOOM_HOME``."""


def auth_headers(token: str) -> dict[str, str]:
    """The HTTP headers that authenticate a request to the daemon."""
    return {"Authorization": f"Bearer {token}"}


def http_client(token: str) -> httpx2.AsyncClient:
    """An ``httpx2`` client for the daemon: the token on every request, generous read timeout, no proxy."""
    return httpx2.AsyncClient(
        headers=auth_headers(token),
        timeout=httpx2.Timeout(CONNECT_TIMEOUT_S, read=READ_TIMEOUT_S),
        # The daemon is on 127.0.0.1: an HTTP(S)_PROXY from the environment must never see the token.
        trust_env=False,
    )


@contextlib.asynccontextmanager
async def connect(home: Path, *, mode: str = "auto", **client_options: Any) -> AsyncIterator[Client]:
    """An MCP client connected to the daemon running for ``home``.

    Args:
        home: the Loom home whose daemon to attach to.
        mode: the protocol era, as ``mcp.Client`` takes it (``"auto"`` or ``"legacy"``).
        **client_options: passed on to ``mcp.Client`` (callbacks, ``read_timeout_seconds``, ...).

    Raises:
        DaemonNotRunning: no discovery file, or its daemon is dead.
        orchestrator.daemon.auth.TokenError: the token cannot be read.
    """
    found = require_daemon(home)
    async with (
        http_client(load_token(home)) as http,
        Client(streamable_http_client(found.url, http_client=http), mode=mode, **client_options) as client,
    ):
        yield client


def require_daemon(home: Path) -> Discovery:
    """The running daemon for ``home``.

    Raises:
        DaemonNotRunning: there is none.
    """
    found = read_discovery(home)
    if found is None:
        raise DaemonNotRunning(f"no Loom daemon is running for {home}; start one with `loom serve`")
    return found
