"""The link from ``loom mcp`` to a running Loom daemon: one MCP client, re-made when the daemon changes.

Above this sits :mod:`clients.mcp_proxy`, the stdio server whose tools are the daemon's. Below it is
one ``mcp.Client`` over streamable HTTP, with the bearer token from ``$LOOM_HOME/daemon.token``,
found through ``$LOOM_HOME/daemon.json`` (:mod:`orchestrator.daemon`). The client lives in a task of
its own, so a daemon that vanishes ends that task and never the caller. Every call is bounded, and
every way the daemon can fail to answer becomes an error result that says what happened and how to
start the daemon again; a JSON-RPC error the daemon itself sends is raised as it is.
"""

from __future__ import annotations

import importlib.metadata
import logging
import math
import urllib.parse
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import anyio
import httpx2
from anyio.abc import TaskGroup, TaskStatus
from mcp import Client, MCPError
from mcp import types as mt
from mcp.client.context import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.dispatcher import ProgressFnT

from clients.loom.daemon import READ_TIMEOUT_S, http_client
from orchestrator.daemon import Discovery, TokenError, load_token, read_discovery

logger = logging.getLogger(__name__)


def _package_version() -> str:
    try:
        return importlib.metadata.version("loom-agent")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree
        return "0"


CONNECT_TIMEOUT_S = 10.0
CALL_MARGIN_S = 30.0
"""How much longer than the tool's own ``wait_s`` a forwarded call may take before it is cancelled."""
_CLIENT_INFO = mt.Implementation(name="loom-mcp", version=_package_version())
"""How the daemon knows us; each call names the client driving ``loom mcp`` in its ``_meta`` (see the proxy)."""


class DaemonGone(Exception):
    """No daemon answers for this ``LOOM_HOME`` (none running, or its discovery file is stale)."""


class DaemonRefused(Exception):
    """A daemon is running but this process cannot use it; the message says why and what to do."""


class DaemonLink:
    """One MCP client connection to the daemon of ``home``, owned by a task of its own, re-made on demand.

    Use as an async context manager, then :meth:`connect`. :meth:`call_tool` never raises for a
    daemon that is gone or slow: it answers with an error result instead.
    """

    def __init__(
        self,
        home: Path,
        *,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        call_margin_s: float = CALL_MARGIN_S,
    ) -> None:
        self.home = home
        self._connect_timeout_s = connect_timeout_s
        self._call_margin_s = call_margin_s
        self._client: Client | None = None
        self._address: Discovery | None = None
        self._tools: list[mt.Tool] = []
        self._stop = anyio.Event()
        self._generation = 0
        self._stopping = False
        """The daemon answered 503: it is shutting down."""
        self._lock = anyio.Lock()
        self._tg: TaskGroup | None = None

    async def __aenter__(self) -> Self:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        assert self._tg is not None
        await self._tg.__aexit__(exc_type, exc, tb)

    @property
    def url(self) -> str:
        """The daemon's MCP endpoint (the last one connected to)."""
        return self._address.url if self._address else "(unknown)"

    @property
    def instructions(self) -> str | None:
        """The daemon's own instructions for driving agents."""
        return self._client.instructions if self._client is not None else None

    async def connect(self) -> None:
        """Connect to the daemon the discovery file names, unless connected to it already.

        The discovery file is read every time (a file read and a pid check): a daemon that stopped
        is noticed before a call is sent to it, and one restarted on another port is connected to.

        Raises:
            DaemonGone: no daemon is running, or nothing answers where the discovery file says.
            DaemonRefused: the daemon answers but refuses us (token) or does not speak MCP.
        """
        async with self._lock:
            found = read_discovery(self.home)
            if self._client is not None:
                if found == self._address:
                    return
                self._drop()
            if found is None:
                raise DaemonGone(f"no Loom daemon is running for {self.home}")
            try:
                token = load_token(self.home)
            except TokenError as exc:
                raise DaemonRefused(str(exc)) from exc
            self._generation += 1
            self._stop = anyio.Event()
            self._stopping = False
            assert self._tg is not None, "the link is not open"
            await self._tg.start(self._own, found, token, self._generation, self._stop)

    async def _own(
        self, found: Discovery, token: str, generation: int, stop: anyio.Event, *, task_status: TaskStatus[None]
    ) -> None:
        """Hold one connection until ``stop``; failures before it is up are raised to :meth:`connect`."""
        statuses: list[int] = []

        async def note(response: httpx2.Response) -> None:
            statuses.append(response.status_code)
            if response.status_code == 503 and self._generation == generation:
                self._stopping = True

        up = False
        with anyio.CancelScope(deadline=anyio.current_time() + self._connect_timeout_s) as scope:
            try:
                async with http_client(token) as http:
                    http.event_hooks = {"response": [note]}
                    # Asking for elicitation lets the daemon put its questions (review_approval) to our caller.
                    transport = streamable_http_client(found.url, http_client=http)
                    async with Client(transport, client_info=_CLIENT_INFO, elicitation_callback=_unrelayed) as client:
                        self._tools = await _list_all_tools(client)
                        scope.deadline = math.inf
                        self._client, self._address, up = client, found, True
                        task_status.started()
                        await stop.wait()
            except Exception as exc:
                if not up:
                    raise _connect_error(found, exc, statuses) from exc
                logger.info("the connection to the Loom daemon at %s ended: %s", found.url, _describe(exc))
            finally:
                if self._generation == generation:
                    self._client = None
        if scope.cancelled_caught and not up:
            raise DaemonRefused(f"the Loom daemon at {found.url} did not answer within {self._connect_timeout_s:g} s")

    def _drop(self) -> None:
        self._client = None
        self._stop.set()

    async def list_tools(self) -> list[mt.Tool]:
        """The daemon's tools; the last list seen while it is unreachable (its calls then explain why)."""
        try:
            await self.connect()
            client = self._client
            if client is not None:
                with anyio.fail_after(self._connect_timeout_s):
                    self._tools = await _list_all_tools(client)
        except Exception as exc:  # the face's tools do not change; an outage is explained by the calls
            logger.warning("listing the Loom daemon's tools failed (%s); answering with the last list", exc)
        return self._tools

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        on_progress: ProgressFnT | None = None,
        *,
        input_responses: mt.InputResponses | None = None,
        request_state: str | None = None,
        meta: mt.RequestParamsMeta | None = None,
    ) -> mt.CallToolResult | mt.InputRequiredResult:
        """Forward one call; the daemon's result unchanged, or an error result if the daemon cannot answer.

        An ``InputRequiredResult`` (the daemon asks the caller something) is returned as it is; the
        answers come back through ``input_responses`` and ``request_state`` on the next call. ``meta`` is
        sent as the request's ``_meta`` (the proxy names its own caller there).

        Raises:
            MCPError: the daemon answered with a JSON-RPC error (passed on as it is).
        """
        try:
            await self.connect()
        except DaemonGone:
            return self._not_running(name)
        except DaemonRefused as exc:
            return error_result(f"Loom: {exc}. {name} was not run.")
        client = self._client
        if client is None:
            return self._not_running(name)
        bound = min(_wait_s(arguments) + self._call_margin_s, READ_TIMEOUT_S)  # ours ends it before httpx2 does
        try:
            with anyio.fail_after(bound):
                result = await client.session.call_tool(
                    name,
                    arguments,
                    progress_callback=on_progress,
                    input_responses=input_responses,
                    request_state=request_state,
                    meta=meta,
                    allow_input_required=True,
                )
        except TimeoutError:
            return error_result(
                f"Loom: the daemon at {self.url} did not answer {name} within {bound:g} s, so the call was "
                "cancelled. If it stays unresponsive, restart it (stop it, then `loom serve`)."
            )
        except MCPError as exc:
            if exc.code != mt.CONNECTION_CLOSED and not await self._gone():
                raise
            self._drop()
            return self._stopped_during(name)
        except Exception as exc:  # a broken connection must become an error result
            if await self._gone():
                self._drop()
                return self._stopped_during(name)
            return error_result(f"Loom: forwarding {name} to the daemon at {self.url} failed: {_describe(exc)}")
        if isinstance(result, mt.InputRequiredResult):
            return result
        return mt.CallToolResult(
            content=result.content, structured_content=result.structured_content, is_error=result.is_error
        )

    async def _gone(self) -> bool:
        """Whether the daemon we talked to has stopped, is stopping, or has been replaced by another one."""
        if self._stopping or self._address is None or read_discovery(self.home) != self._address:
            return True
        return not await _listening(self._address.url)

    def _not_running(self, name: str) -> mt.CallToolResult:
        return error_result(
            f"Loom: the daemon is not running (it was at {self.url}), so {name} was not run. Start it again "
            f"with `loom serve` (LOOM_HOME={self.home}); the next call reconnects. Sessions, runs and events "
            "are kept in the store."
        )

    def _stopped_during(self, name: str) -> mt.CallToolResult:
        return error_result(
            f"Loom: the daemon at {self.url} stopped while {name} was in progress; whether it took effect is "
            f"unknown. Start it again with `loom serve` (LOOM_HOME={self.home}), then check with get_run or "
            "read_events; the next call reconnects."
        )


async def _unrelayed(context: ClientRequestContext, params: mt.ElicitRequestParams) -> mt.ElicitResult:
    # Questions reach us as InputRequiredResults (2026-07-28) and are relayed by the proxy; a daemon
    # speaking the handshake era would send them here, where nobody can answer.
    return mt.ElicitResult(action="cancel")


def _connect_error(found: Discovery, exc: Exception, statuses: list[int]) -> Exception:
    if _contains(exc, httpx2.ConnectError) or 503 in statuses:
        return DaemonGone(f"nothing answers at {found.url} (pid {found.pid})")
    if 401 in statuses or 403 in statuses:
        return DaemonRefused(
            f"the Loom daemon at {found.url} refused the token in daemon.token (HTTP {max(statuses)}); "
            "restart the daemon (`loom serve`) so that the file and the daemon agree"
        )
    return DaemonRefused(f"cannot attach to the Loom daemon at {found.url}: {_describe(exc)}")


async def _listening(url: str) -> bool:
    parts = urllib.parse.urlsplit(url)
    try:
        with anyio.fail_after(2.0):
            stream = await anyio.connect_tcp(parts.hostname or "127.0.0.1", parts.port or 80)
    except TimeoutError:
        return True  # slow, not gone: the call's own bound deals with a stuck daemon
    except OSError:
        return False
    await stream.aclose()
    return True


async def _list_all_tools(client: Client) -> list[mt.Tool]:
    tools: list[mt.Tool] = []
    cursor: str | None = None
    for _ in range(100):  # a server that pages forever must not hang us
        page = await client.list_tools(cursor=cursor, cache_mode="refresh")
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _wait_s(arguments: dict[str, Any]) -> float:
    value = arguments.get("wait_s")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return 0.0
    return max(float(value), 0.0)


def error_result(text: str) -> mt.CallToolResult:
    """A tool result with ``is_error`` set and ``text`` as its one content block."""
    return mt.CallToolResult(content=[mt.TextContent(type="text", text=text)], is_error=True)


def _contains(exc: BaseException, kind: type[BaseException]) -> bool:
    if isinstance(exc, kind):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return any(_contains(inner, kind) for inner in exc.exceptions)
    return exc.__cause__ is not None and _contains(exc.__cause__, kind)


def _describe(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
