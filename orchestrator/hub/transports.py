"""How the hub reaches one MCP server: in-process, a stdio child process, streamable HTTP or legacy HTTP+SSE.

Opening a connection is the transport's business; keeping it alive, restarting it and calling tools
over it is the hub's (:mod:`orchestrator.hub.pool`).
"""

from __future__ import annotations

import contextlib
import os
from collections import OrderedDict
from collections.abc import AsyncIterator, Hashable, Mapping
from pathlib import Path
from typing import Any, Protocol, TextIO

from mcp import Client, StdioServerParameters
from mcp import types as mt
from mcp.client.caching import CacheMode
from mcp.server.mcpserver import MCPServer

from orchestrator.config import ServerConfig


class DeferredServer(Protocol):
    """An in-process server built on its first use, whose listing is known by a key before it is built.

    Loom's built-in servers are handed to the hub this way (``servers._tools.DeferredServer``): a session's servers
    are built only when it first calls one of their tools, and two servers with equal ``listing_key`` list the same
    tools, so the listing learned from the first built of its kind serves the rest.
    """

    @property
    def listing_key(self) -> Hashable:
        """Equal for servers that list the same tools."""
        ...

    def build(self) -> MCPServer:
        """The server (built once, the same object on every later call)."""
        ...


Target = MCPServer | ServerConfig | DeferredServer
"""What the hub connects to: a built in-process server, a deferred one, or a configured external server."""


def open_errlog(name: str, target: Target, log_dir: Path | None, files: contextlib.ExitStack) -> TextIO | None:
    """The file a stdio server's stderr is appended to (``LOG_DIR/NAME.log``), or None for other servers."""
    if not isinstance(target, ServerConfig) or target.transport != "stdio" or log_dir is None:
        return None
    # Private: a server's stderr may hold what its tools read.
    log_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = log_dir / f"{name}.log"
    # Opened by path (the tail of a failed start is read back through ``.name``), created 0600, no symlink followed.
    private = open(path, "a+", encoding="utf-8", opener=lambda p, flags: os.open(p, flags | os.O_NOFOLLOW, 0o600))
    return files.enter_context(private)


_DISCOVERED: dict[tuple[type[MCPServer], str], mt.DiscoverResult] = {}
"""``server/discover`` answers of in-process servers by (class, name): their versions and capabilities, which depend
on the handlers a server of that kind registers, not on its instance (the instructions, which do, are its own)."""


def open_client(
    target: MCPServer | ServerConfig, errlog: TextIO | None, options: Mapping[str, Any] | None = None
) -> Client:
    """An unopened ``Client`` for ``target``; entering it starts the server (stdio) or connects.

    An in-process server of a kind already connected in this process is not asked ``server/discover`` again:
    every session connects its own copy of each built-in server, all answering alike, so the first answer is
    adopted for the rest (the same protocol version, the same direct dispatch, one round trip less).
    ``options`` (the session's :class:`~orchestrator.hub.client_caps.ClientHooks`) go to external servers' clients.
    """
    if isinstance(target, MCPServer):
        known = _DISCOVERED.get(_server_kind(target))
        if known is None or not known.supported_versions or not _lists_as_it_answers(target):
            return Client(target)
        own = known.model_copy(update={"instructions": target.instructions})
        return Client(target, mode=known.supported_versions[-1], prior_discover=own)
    if target.transport == "stdio":
        from mcp.client.stdio import stdio_client

        params = StdioServerParameters(
            command=target.command, args=list(target.args), env=target.env or None, cwd=target.cwd
        )
        return Client(stdio_client(params, errlog=errlog) if errlog is not None else params, **(options or {}))
    if target.transport == "sse":
        return Client(_sse_transport(target), **(options or {}))
    return Client(_http_transport(target), **(options or {}))


def _server_kind(server: MCPServer) -> tuple[type[MCPServer], str]:
    return type(server), server.name


async def connected_tools(target: MCPServer | ServerConfig, client: Client) -> list[mt.Tool]:
    """The tools of a freshly connected server; for an in-process one, without a ``tools/list`` round trip.

    An in-process ``MCPServer`` answers ``tools/list`` with its own ``list_tools()``, which is read here directly,
    and the listing is handed to the client as if it had fetched it (its output schemas are what it checks
    results against). That spares each session four listings serialised, sent and validated again for tools
    whose metadata is built once per process. Where the SDK's client has no such hook (mcp 2.3's private
    ``_absorb_tool_listing``), or the server is not in-process, the tools are listed over MCP as before.
    """
    if isinstance(target, MCPServer) and _lists_as_it_answers(target):
        found = client.session.discover_result
        if found is not None:
            _DISCOVERED.setdefault(_server_kind(target), found)
        absorb = getattr(client.session, "_absorb_tool_listing", None)
        if callable(absorb):
            listing = absorb(mt.ListToolsResult(tools=await target.list_tools()), complete=True)
            if isinstance(listing, mt.ListToolsResult):
                return list(listing.tools)
    return await list_all_tools(client)


_LISTED: OrderedDict[tuple[object, ...], tuple[list[mt.Tool], tuple[object, ...]]] = OrderedDict()
"""Listings by what they are made of (each tool's texts and the identity of its schemas and annotations), each held
with the objects whose ids its key names, so an id is not reused while its entry lives."""
_LISTINGS = 256


_DEFERRED_LISTED: dict[Hashable, list[mt.Tool]] = {}
"""Listings of deferred servers by their ``listing_key``: one entry per kind of built-in server (a handful)."""


async def listed_deferred(target: DeferredServer) -> list[mt.Tool] | None:
    """A deferred server's tools without building it when one of its kind was listed before; None where unknown.

    The first of its kind is built here and listed as `listed_in_process` lists it; the listing is kept for the rest.
    """
    known = _DEFERRED_LISTED.get(target.listing_key)
    if known is not None:
        return list(known)
    listed = await listed_in_process(target.build())
    if listed is not None:
        _DEFERRED_LISTED[target.listing_key] = list(listed)
    return listed


async def listed_in_process(target: Target) -> list[mt.Tool] | None:
    """An in-process server's tools as its ``tools/list`` would answer, without connecting; None where unknown.

    The SDK builds its listing afresh each time (a pydantic model per tool, copying each schema); a server built
    for every session from the process's tool metadata (``servers._tools``) lists the very same objects, so the
    listing made for the first is handed to the next, its schemas the same objects the hub's validators are kept by.
    """
    if not isinstance(target, MCPServer) or not _lists_as_it_answers(target):
        return None
    manager = getattr(target, "_tool_manager", None)
    infos = manager.list_tools() if manager is not None else None
    if not isinstance(infos, list):
        return list(await target.list_tools())
    held = tuple(obj for info in infos for obj in (info.parameters, info.output_schema, info.annotations, info.icons))
    key = (
        type(target),
        *(
            (info.name, info.title, info.description, repr(info.meta), *(id(obj) for obj in held[4 * i : 4 * i + 4]))
            for i, info in enumerate(infos)
        ),
    )
    found = _LISTED.get(key)
    if found is not None and all(a is b for a, b in zip(found[1], held, strict=True)):
        _LISTED.move_to_end(key)
        return list(found[0])
    tools = list(await target.list_tools())
    _LISTED[key] = (tools, held)
    while len(_LISTED) > _LISTINGS:
        _LISTED.popitem(last=False)
    return list(tools)


def _lists_as_it_answers(server: MCPServer) -> bool:
    """Whether ``server.list_tools()`` is what its ``tools/list`` answers: no middleware but the SDK's own.

    The SDK's (tracing, request-state sealing) leaves a listing and ``server/discover`` alone; a server's own
    middleware might not, so such a server is asked over MCP each time.
    """
    lowlevel = getattr(server, "_lowlevel_server", None)
    middleware = getattr(lowlevel, "middleware", None)
    if not isinstance(middleware, list):
        return False
    # Loom's servers mark theirs (resources, completions, client logs) as leaving tool listings alone.
    return all(type(m).__module__.startswith("mcp.") or getattr(m, "leaves_tool_listing", False) for m in middleware)


async def list_all_tools(client: Client, *, cache_mode: CacheMode = "use") -> list[mt.Tool]:
    """Every tool a server offers, following pagination (at most 100 pages).

    ``cache_mode``: ``"refresh"`` after a list change, ``"bypass"`` for a health check that must reach the server.
    """
    tools: list[mt.Tool] = []
    cursor: str | None = None
    for _ in range(100):  # a server that pages forever must not hang start-up
        page = await client.list_tools(cursor=cursor, cache_mode=cache_mode)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


@contextlib.asynccontextmanager
async def _http_transport(cfg: ServerConfig) -> AsyncIterator[Any]:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    # No read timeout: each call's own limit (an anyio deadline in the hub) governs how long it may
    # run, and per-tool limits may exceed the server's; connecting is bounded by the start-up limit.
    timeout = httpx2.Timeout(cfg.startup_timeout_s, read=None)
    async with httpx2.AsyncClient(headers=cfg.headers, timeout=timeout) as http:
        async with streamable_http_client(cfg.url, http_client=http) as streams:
            yield streams


SSE_READ_TIMEOUT_S = 24 * 3600.0
"""How long the legacy SSE stream may stay silent before the SDK drops it: far longer than any call may run, since
the supervisor's health checks (answered on that stream) are what notice a dead server."""


@contextlib.asynccontextmanager
async def _sse_transport(cfg: ServerConfig) -> AsyncIterator[Any]:
    from mcp.client.sse import sse_client

    async with sse_client(
        cfg.url, headers=cfg.headers or None, timeout=cfg.startup_timeout_s, sse_read_timeout=SSE_READ_TIMEOUT_S
    ) as streams:
        yield streams


def stderr_tail(errlog: TextIO | None, offset: int) -> str:
    """The end of what a stdio server wrote to stderr since ``offset``, to quote in its failure."""
    if errlog is None:
        return ""
    try:
        errlog.flush()
        with open(errlog.name, encoding="utf-8", errors="replace") as f:
            f.seek(offset)
            tail = f.read()[-600:].strip()
    except OSError:
        return ""
    return f"; its stderr ends with: {tail}" if tail else ""
