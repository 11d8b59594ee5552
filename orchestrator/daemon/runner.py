"""Running the daemon: lock, token, socket, runtime, session host, uvicorn, signals, discovery file.

The daemon's runtime holds the home's writer lock (:mod:`orchestrator.runtime.lock`) like any embedded
runtime, so ``loom run`` or ``loom mcp`` without the daemon refuse while it runs, and it refuses to start
while one of them runs sessions on the home.

Everything runs in one anyio event loop: uvicorn's ``Server.serve()`` is awaited next to the
runtime it serves, so MCP requests and background runs share the loop and the session host.

Shutdown (SIGTERM, SIGINT): uvicorn stops accepting, requests in flight (long polls, SSE streams)
are ended at once by the request gate, the MCP session manager closes, the session host closes
(runs still going are recorded as interrupted), the store closes, the discovery file is removed,
and the lock is released. A second signal stops waiting for requests that ignore cancellation.

With ``"autoResume": true`` at the top level of ``$LOOM_HOME/config.json``, the runs that the start
marked interrupted (a crash left them running) are resumed at once (see :mod:`orchestrator.loop.resume`).
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import os
import signal
import socket
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
import uvicorn

from orchestrator.config import LoomConfig, ServerConfig
from orchestrator.daemon.app import MCP_PATH, RequestGate, build_app
from orchestrator.daemon.auth import ensure_home, ensure_token, token_path
from orchestrator.daemon.discovery import Discovery, InstanceLock, remove_discovery, write_discovery
from orchestrator.runtime.lock import HomeInUse

logger = logging.getLogger(__name__)

HOST = "127.0.0.1"
GRACE_S = 3
"""How long a stopping daemon waits for requests that ignore cancellation (the request gate ends the rest)."""


class DaemonError(Exception):
    """The daemon cannot start (port taken, unusable home); the message says what to do."""


class StoreFailed(DaemonError):
    """Loom's database could not be opened or written; the message says why (a failure, not a usage error)."""


def _store_error(exc: BaseException) -> BaseException | None:
    """The store's error ``exc`` is or holds (task groups wrap it in exception groups), or None."""
    from orchestrator.store.interface import StoreError

    if isinstance(exc, StoreError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        return next((found for inner in exc.exceptions if (found := _store_error(inner)) is not None), None)
    return None


@dataclass
class _Control:
    """What the signal watcher and the serving code share."""

    server: _Server | None = None
    gate: RequestGate | None = None
    stopping: bool = False

    def stop(self) -> None:
        if self.stopping and self.server is not None:
            self.server.force_exit = True  # a second signal: stop waiting for open requests
        self.stopping = True
        if self.server is not None:
            self.server.should_exit = True  # stop accepting; uvicorn then drains and closes connections
        if self.gate is not None:
            self.gate.close()  # end long polls and SSE streams now, rather than after the grace period


class _Server(uvicorn.Server):
    """uvicorn, minus its signal handling, telling us once it listens."""

    def __init__(self, config: uvicorn.Config, on_started: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_started = on_started

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # uvicorn's own handlers re-raise the signal once it has shut down, which would kill the
        # process before the session host is closed and the discovery file removed. We watch the
        # signals ourselves (see _watch_signals) and only set should_exit.
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            self._on_started()


def bind(port: int) -> socket.socket:
    """A TCP socket bound to 127.0.0.1:``port`` (0 picks a free port); uvicorn starts listening on it.

    Binding here rather than in uvicorn gives the real port before the server starts, and a clear
    error when the port is taken.

    Raises:
        DaemonError: the port is taken or not allowed.
    """
    # IPPROTO_TCP, not 0: asyncio turns Nagle off on accepted connections only for sockets that say they are TCP,
    # and with it on every response waited ~40 ms for the client's delayed ACK (a face call took 48-52 ms).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
    except OSError as exc:
        sock.close()
        raise DaemonError(
            f"cannot listen on {HOST}:{port}: {exc.strerror or exc}; pass --port or set LOOM_PORT (0 picks a free port)"
        ) from exc
    return sock


async def run_daemon(
    home: Path,
    port: int,
    servers: Sequence[ServerConfig] = (),
    *,
    on_ready: Callable[[Discovery], None] | None = None,
    auto_resume: bool | None = None,
    config: LoomConfig | None = None,
) -> None:
    """Serve the MCP face for ``home`` on 127.0.0.1:``port`` until SIGTERM or SIGINT (main thread only).

    Args:
        home: the Loom home (store, token, discovery file, lock).
        port: the TCP port; 0 picks a free one (the discovery file holds the real one).
        servers: external MCP servers every session connects.
        on_ready: called once the daemon listens and its discovery file is written.
        auto_resume: resume the runs a crash left running; None reads ``autoResume`` from ``home/config.json``.
        config: the loaded configuration; its servers, tool timeouts and shell options replace ``servers``.

    Raises:
        orchestrator.daemon.discovery.AlreadyRunning: another daemon holds ``home``.
        orchestrator.daemon.auth.TokenError: the token file is unsafe or unusable.
        DaemonError: the port cannot be bound, or another process runs sessions on ``home``.
        StoreFailed: the database cannot be opened (or failed while the daemon ran).
    """
    ensure_home(home)
    with InstanceLock(home), contextlib.ExitStack() as cleanup:
        token = ensure_token(home)
        sock = cleanup.enter_context(bind(port))
        # Registered after the lock, so it runs before the lock is released: whoever takes the
        # lock next never sees our file.
        cleanup.callback(remove_discovery, home)
        control = _Control()
        failure: list[Exception] = []
        async with anyio.create_task_group() as tg:
            # Watching for the whole life of the daemon, shutdown included: a signal during
            # shutdown must not kill the process before the session host has closed.
            tg.start_soon(_watch_signals, control)
            try:
                resume = auto_resume if auto_resume is not None else read_auto_resume(home)
                await _serve(home, servers, sock, token, control, on_ready, resume, config)
            except HomeInUse as exc:  # an embedded runtime (`loom mcp`, `loom run`) is running sessions on the home
                failure.append(
                    DaemonError(
                        f"{exc.holder} is running sessions on LOOM_HOME={home}, and only one process at a time may; "
                        "stop it (or let it finish), then start `loom serve` again. Once the daemon runs, `loom run` "
                        "and `loom mcp` attach to it"
                    )
                )
            except Exception as exc:  # raised as itself below, not wrapped in the task group's ExceptionGroup
                store = _store_error(exc)
                failure.append(StoreFailed(str(store)) if store is not None else exc)
            finally:
                tg.cancel_scope.cancel()
        if failure:
            raise failure[0]


async def _serve(
    home: Path,
    servers: Sequence[ServerConfig],
    sock: socket.socket,
    token: str,
    control: _Control,
    on_ready: Callable[[Discovery], None] | None,
    auto_resume: bool = False,
    config: LoomConfig | None = None,
) -> None:
    from orchestrator.face.server import build_face
    from orchestrator.runtime.embedded import embedded_runtime
    from orchestrator.runtime.host import SessionHost

    port: int = sock.getsockname()[1]
    url = f"http://{HOST}:{port}{MCP_PATH}"

    def started() -> None:
        found = write_discovery(home, url)
        if on_ready is not None:
            on_ready(found)

    limits = config.sessions if config is not None else None  # how many idle sessions stay open, and how long
    async with embedded_runtime(home, servers, config=config) as runtime, SessionHost(runtime, limits=limits) as host:
        if auto_resume and host.interrupted:
            resumed = await host.resume_interrupted()
            logger.info("autoResume: resumed %d of %d interrupted runs", len(resumed), len(host.interrupted))
        if auto_resume:  # after the runs: an orchestration waits for its children's resumed runs, never restarts them
            orchestrations = await host.orchestrations.resume_unfinished()
            logger.info("autoResume: resumed %d unfinished orchestrations", len(orchestrations))
            goals = await host.goals.resume_unfinished()  # likewise: a goal waits for its work session's resumed run
            logger.info("autoResume: resumed %d unfinished goals", len(goals))
        info = {"pid": os.getpid(), "url": url}
        gate = RequestGate(build_app(build_face(host), token, info=info, token_file=token_path(home)))
        server_config = uvicorn.Config(
            gate,
            host=HOST,
            port=port,
            lifespan="on",
            log_config=None,  # keep the logging the CLI configured (stderr, LOOM_LOG_LEVEL)
            access_log=False,
            timeout_graceful_shutdown=GRACE_S,
        )
        control.server, control.gate = _Server(server_config, started), gate
        if control.stopping:  # a signal arrived while the runtime was opening
            return
        with _serving_gc():
            await control.server.serve(sockets=[sock])
        logger.info("daemon stopped accepting; closing sessions")


@contextlib.contextmanager
def _serving_gc() -> Iterator[None]:
    """While the daemon serves, what was alive once it was up is frozen: the collector never walks it again.

    A daemon keeps what it imported and built at start (the SDK, pydantic's validators, the servers' tool
    metadata, some 110,000 objects) for its whole life, and every full collection walked all of it again. With
    200 followed sessions those collections took 3.5 s of the daemon's CPU (0.27-0.33 s each, every request and
    run stopped meanwhile); frozen, 1.5 s (0.11 s each). The thresholds stay Python's: larger ones (3,000 or
    10,000 young objects) cut the collections further but let a daemon that has opened 1,000 sessions grow
    from 99 to 118-120 MiB, past the memory target. Unfrozen when serving ends (a test may run the daemon in
    its own process).
    """
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def read_auto_resume(home: Path) -> bool:
    """The top-level ``autoResume`` switch of ``home/config.json`` (false when absent or unreadable)."""
    try:
        data = json.loads((home / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False  # a missing file means the default; an invalid one was already reported by the CLI
    value = data.get("autoResume") if isinstance(data, dict) else None
    if value is not None and not isinstance(value, bool):
        logger.warning("%s: autoResume must be true or false, not %r; not resuming", home / "config.json", value)
    return value is True


async def _watch_signals(control: _Control) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            logger.info("received %s; shutting down", signal.Signals(signum).name)
            control.stop()
