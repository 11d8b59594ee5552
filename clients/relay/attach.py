"""Attaching ``loom mcp`` to a running daemon: probe it, then relay stdio to it until the caller goes.

:mod:`clients.cli.stdio_face` calls :func:`probe` when the discovery file names a daemon, and
:func:`relay_stdio` once it answers; neither imports more than the standard library and Loom's
stdlib-only discovery and token modules, so an attached ``loom mcp`` answers its handshake in tens of
milliseconds instead of the second the MCP SDK takes to import.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

from clients.relay import answers
from clients.relay.relay import CALL_MARGIN_S, CONNECT_TIMEOUT_S, Relay
from clients.relay.upstream import Broken, Endpoint, TimedOut, Unreachable, Upstream
from clients.relay.wire import CLIENT_CAPABILITIES_META, CLIENT_INFO_META, VERSION_META
from orchestrator.daemon.auth import TokenError, load_token
from orchestrator.daemon.discovery import Discovery

MODERN_VERSION = "2026-07-28"
CALL_MARGIN_ENV = "LOOM_MCP_CALL_MARGIN_S"
"""Overrides :data:`~clients.relay.relay.CALL_MARGIN_S`: the seconds a forwarded call may take past its ``wait_s``."""


class DaemonGone(Exception):
    """No daemon answers where the discovery file says (it was killed and left the file behind)."""


class DaemonRefused(Exception):
    """A daemon is running but this process cannot use it; the message says why and what to do."""


def probe(home: Path, found: Discovery, *, connect_timeout_s: float = CONNECT_TIMEOUT_S) -> Upstream:
    """Check that the daemon ``found`` names answers MCP and takes our token; the connection to relay over.

    The probe is one stateless ``server/discover`` exchange (2026-07-28), which needs no session.

    Raises:
        DaemonGone: nothing answers at its address, or it is stopping.
        DaemonRefused: its token cannot be read, it refuses it, or it does not answer as an MCP server.
    """
    try:
        upstream = Upstream(Endpoint.parse(found.url), load_token(home), connect_timeout_s=connect_timeout_s)
    except (TokenError, ValueError) as exc:
        raise DaemonRefused(str(exc)) from exc
    try:
        _check(upstream, found, connect_timeout_s)
    except BaseException:
        upstream.close()
        raise
    return upstream


def _check(upstream: Upstream, found: Discovery, connect_timeout_s: float) -> None:
    answered: list[dict[str, Any]] = []

    def deliver(message: dict[str, Any]) -> bool:
        answered.append(message)
        return "method" not in message

    meta = {
        VERSION_META: MODERN_VERSION,
        CLIENT_INFO_META: {"name": "loom-mcp", "version": "0"},
        CLIENT_CAPABILITIES_META: {},
    }
    request = {"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": {"_meta": meta}}
    headers = {"Mcp-Protocol-Version": MODERN_VERSION, "Mcp-Method": "server/discover"}
    try:
        reply = upstream.post(request, headers, deliver, deadline=time.monotonic() + connect_timeout_s)
    except Unreachable as exc:
        raise DaemonGone(f"nothing answers at {found.url} (pid {found.pid})") from exc
    except TimedOut as exc:
        raise DaemonRefused(f"the Loom daemon at {found.url} did not answer within {connect_timeout_s:g} s") from exc
    except Broken as exc:
        raise DaemonRefused(f"cannot attach to the Loom daemon at {found.url}: {exc}") from exc
    if reply.status == 503:
        raise DaemonGone(f"the Loom daemon at {found.url} (pid {found.pid}) is shutting down")
    if reply.status in (401, 403):
        raise DaemonRefused(answers.token_refused(found.url, reply.status))
    if not reply.answered or "result" not in answered[-1]:
        said = answered[-1].get("error") if answered else reply.error
        raise DaemonRefused(
            f"cannot attach to the Loom daemon at {found.url}: it does not answer as an MCP server "
            f"(HTTP {reply.status}{f', {said}' if said else ''})"
        )


class _Stopped(BaseException):
    """SIGTERM or SIGINT: stop relaying, as a closed stdin does."""


def relay_stdio(home: Path, found: Discovery, upstream: Upstream) -> None:
    """Relay this process's stdin and stdout to the daemon until stdin closes, SIGTERM or SIGINT.

    The protocol keeps a descriptor of its own; fd 1 then points at stderr, so that nothing else written
    to stdout (a stray print, a library's warning) can reach the wire.
    """
    out = os.fdopen(os.dup(1), "wb")
    try:
        os.dup2(sys.stderr.fileno(), 1)
    except (OSError, ValueError):
        pass
    relay = Relay(home, found, upstream, out, call_margin_s=_call_margin_s())

    def stop(signum: int, frame: FrameType | None) -> None:
        for name in (signal.SIGTERM, signal.SIGINT):
            signal.signal(name, signal.SIG_IGN)  # a second signal must not cut the session's closing short
        raise _Stopped()

    previous = {name: signal.signal(name, stop) for name in (signal.SIGTERM, signal.SIGINT)}
    stdin = sys.stdin.buffer
    try:
        relay.serve(iter(stdin.readline, b""))
    except _Stopped:
        pass
    finally:
        for name, handler in previous.items():
            signal.signal(name, handler)
        with contextlib.suppress(OSError):
            out.close()


def _call_margin_s() -> float:
    raw = os.environ.get(CALL_MARGIN_ENV, "")
    try:
        value = float(raw)
    except ValueError:
        return CALL_MARGIN_S
    return value if value > 0 else CALL_MARGIN_S
