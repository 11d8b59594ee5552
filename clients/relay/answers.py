"""What the relay says itself, as JSON-RPC messages: error results for the caller's model, and protocol errors.

The texts are the ones the SDK proxy gave before the relay replaced it, so that a driving agent (and the
tests) read the same thing: what happened, whether the call ran, and to start ``loom serve`` again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

INTERNAL_ERROR = -32603
PARSE_ERROR = -32700
INVALID_REQUEST = -32600


def result(request_id: Any, body: dict[str, Any], *, modern: bool) -> dict[str, Any]:
    """A JSON-RPC response carrying ``body``; a 2026-07-28 result must say its ``resultType``."""
    if modern:
        body = {"resultType": "complete", **body}
    return {"jsonrpc": "2.0", "id": request_id, "result": body}


def error_result(request_id: Any, text: str, *, modern: bool) -> dict[str, Any]:
    """A ``tools/call`` response with ``isError`` set and ``text`` as its one content block."""
    return result(request_id, {"content": [{"type": "text", "text": text}], "isError": True}, modern=modern)


def error(request_id: Any, code: int, message: str) -> dict[str, Any]:
    """A JSON-RPC error response."""
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def not_running(home: Path, url: str, name: str) -> str:
    """The daemon is gone: nothing was run."""
    return (
        f"Loom: the daemon is not running (it was at {url}), so {name} was not run. Start it again "
        f"with `loom serve` (LOOM_HOME={home}); the next call reconnects. Sessions, runs and events "
        "are kept in the store."
    )


def stopped_during(home: Path, url: str, name: str) -> str:
    """The daemon went away with the call in flight: whether it ran is unknown."""
    return (
        f"Loom: the daemon at {url} stopped while {name} was in progress; whether it took effect is "
        f"unknown. Start it again with `loom serve` (LOOM_HOME={home}), then check with get_run or "
        "read_events; the next call reconnects."
    )


def timed_out(url: str, name: str, bound_s: float) -> str:
    """The daemon did not answer in time; the call was cancelled."""
    return (
        f"Loom: the daemon at {url} did not answer {name} within {bound_s:g} s, so the call was "
        "cancelled. If it stays unresponsive, restart it (stop it, then `loom serve`)."
    )


def failed(url: str, name: str, why: str) -> str:
    """Forwarding failed while the daemon still runs."""
    return f"Loom: forwarding {name} to the daemon at {url} failed: {why}"


def refused(reason: str, name: str) -> str:
    """A daemon runs but cannot be used (its token changed, say)."""
    return f"Loom: {reason}. {name} was not run."


def token_refused(url: str, status: int) -> str:
    """The daemon refuses the token in ``daemon.token``."""
    return (
        f"the Loom daemon at {url} refused the token in daemon.token (HTTP {status}); "
        "restart the daemon (`loom serve`) so that the file and the daemon agree"
    )
