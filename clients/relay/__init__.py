"""``loom mcp`` attached to a daemon: a standard-library relay between stdio and the daemon's HTTP face.

Above it is the agent that spawned ``loom mcp`` (newline-delimited JSON-RPC on stdin and stdout); below
it, the daemon's streamable-HTTP endpoint on 127.0.0.1 (:mod:`orchestrator.daemon`). Nothing here
imports the MCP SDK, httpx, pydantic or anyio: a spawn that only relays must not pay a second for them.

- :mod:`~clients.relay.attach`: :func:`probe` the daemon, then :func:`relay_stdio` until the caller goes.
- :mod:`~clients.relay.relay`: the relay itself, both protocol eras, sessions and failures.
- :mod:`~clients.relay.upstream`: POSTs over kept-alive connections, replies read as they stream.
- :mod:`~clients.relay.standalone`: a 2025-era session's GET stream (the daemon's own messages), kept open.
- :mod:`~clients.relay.sse`: server-sent events, a line at a time.
- :mod:`~clients.relay.answers`: what the relay says itself when the daemon cannot answer.
"""

from __future__ import annotations

from clients.relay.attach import DaemonGone, DaemonRefused, probe, relay_stdio

__all__ = ["DaemonGone", "DaemonRefused", "probe", "relay_stdio"]
