"""One supervised connection's state, and the health the hub reports for it (:mod:`orchestrator.hub.supervisor`)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

import anyio
from mcp import Client
from mcp import types as mt

from orchestrator.config import DEFAULT_STARTUP_TIMEOUT_S, ServerConfig
from orchestrator.events import ServerState
from orchestrator.hub.transports import Target

__all__ = ["Connection", "FailureHook", "ServerHealth", "ServerUnavailableError", "StateHook", "TransportName"]

TransportName = Literal["in-process", "stdio", "http", "sse"]


@dataclass(frozen=True, slots=True)
class ServerHealth:
    """One server as its supervisor sees it now."""

    name: str
    transport: TransportName
    state: ServerState
    """Built-in servers are ``ready`` from the start: they are connected in-process on their first call."""
    tools: int
    last_error: str
    """Why it last failed or degraded ("" if it never did); kept after it recovers."""
    restarts: int
    """Restart attempts made by this hub (the first start is not counted)."""
    latency_ms: float | None
    """The last call's or health check's round trip; None before any."""
    since: float
    """Wall-clock time (``time.time()``) it entered ``state``."""
    stderr_tail: str
    """The end of a stdio server's stderr when it last failed ("" otherwise)."""


StateHook = Callable[[ServerHealth, str], Awaitable[None]]
"""Told an external server's health after each change of state, with the reason."""
FailureHook = Callable[[str, str], Awaitable[None]]
"""Called with (server, message) whenever a server fails to start or stops answering."""


class ServerUnavailableError(Exception):
    """A server cannot be reached now; the message says which and why, in the user's terms."""


@dataclass
class Connection:
    """One server's connection and supervision state (owned by a :class:`Supervisor`)."""

    name: str
    target: Target
    client: Client | None = None
    tools: list[mt.Tool] = field(default_factory=list[mt.Tool])
    error: str | None = None
    """Why it is down now; None while connected (or never tried)."""
    failures: int = 0
    """Failures since it last connected: which backoff step the next restart waits."""
    retry_at: float = 0.0
    generation: int = 0
    """Bumped on every (re)connect so that a dying old connection task cannot clobber a new one."""
    stop: anyio.Event = field(default_factory=anyio.Event)
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    deferred: bool = False
    """An in-process server whose tools are known without a connection: it connects on its first call."""
    state: ServerState = "stopped"
    """External servers start ``stopped`` (never started); built-in ones are set ``ready`` by the hub."""
    since: float = field(default_factory=time.time)
    last_error: str = ""
    errtail: str = ""
    restarts: int = 0
    latency_ms: float | None = None
    last_ok: float = 0.0
    """``anyio.current_time()`` of its last answer (a call or a check): a busy server needs no ping."""
    busy: int = 0
    """Calls in flight: a server working on a call is not pinged (a serial server would seem wedged)."""
    wake: anyio.Event = field(default_factory=anyio.Event)
    """Set to make its watcher act now (a list changed, a listen stream broke, a restart is due)."""
    dirty: bool = False
    """A list_changed arrived: its listings are fetched again."""
    check_now: bool = False
    refreshing: anyio.Event | None = None
    """Set while its listings are being fetched again; a call that ends meanwhile waits for the new list."""
    starting: anyio.CancelScope | None = None

    @property
    def config(self) -> ServerConfig | None:
        """Its ``mcpServers`` entry; None for a built-in server."""
        return self.target if isinstance(self.target, ServerConfig) else None

    @property
    def startup_timeout_s(self) -> float:
        """How long a start may take."""
        return self.target.startup_timeout_s if isinstance(self.target, ServerConfig) else DEFAULT_STARTUP_TIMEOUT_S

    def poke(self) -> None:
        """Wake its watcher."""
        self.wake.set()
