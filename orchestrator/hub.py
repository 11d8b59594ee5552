"""The hub: one MCP client per server, and the only way the agent loop reaches a tool.

Above it sits the agent loop, which sees a flat list of namespaced tools and gets a
:class:`ToolOutcome` for every call, never an exception. Below it are MCP ``Client`` connections:
Loom's own servers in-process (the SDK's direct in-memory dispatch) and external servers over stdio
or streamable HTTP. Each connection lives in a task owned by the hub's task group; a server that
fails to start or dies turns its tools into error results and is restarted on demand, with backoff.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TextIO

import anyio
import jsonschema
from anyio.abc import TaskGroup
from mcp import Client, MCPError, StdioServerParameters
from mcp import types as mt
from mcp.server.mcpserver import MCPServer

from orchestrator.config import DEFAULT_CALL_TIMEOUT_S, DEFAULT_STARTUP_TIMEOUT_S, ServerConfig
from orchestrator.events import FailureKind
from orchestrator.models.base import ToolSpec
from orchestrator.toolnames import namespaced, server_of

FailureHook = Callable[[str, str], Awaitable[None]]
"""Called with (server, message) whenever a server fails to start or stops answering."""

_RESTART_BACKOFF_S = (1.0, 2.0, 5.0, 15.0, 60.0)


@dataclass(frozen=True, slots=True)
class HubTool:
    """A tool as the hub exposes it."""

    name: str
    """Namespaced, model-safe name."""
    server: str
    remote_name: str
    """The name the server itself uses."""
    description: str
    input_schema: dict[str, Any]
    annotations: mt.ToolAnnotations | None
    validator: jsonschema.protocols.Validator | None

    @property
    def spec(self) -> ToolSpec:
        """The tool as offered to a model."""
        return ToolSpec(self.name, self.description, self.input_schema)


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """What a tool call produced, ready to feed back to the model."""

    content: str
    is_error: bool = False
    failure: FailureKind | None = None
    structured: dict[str, Any] | None = None


@dataclass
class _Connection:
    name: str
    target: MCPServer | ServerConfig
    client: Client | None = None
    tools: list[mt.Tool] = field(default_factory=list[mt.Tool])
    error: str | None = None
    failures: int = 0
    retry_at: float = 0.0
    generation: int = 0
    """Bumped on every (re)connect so that a dying old connection task cannot clobber a new one."""
    stop: anyio.Event = field(default_factory=anyio.Event)
    lock: anyio.Lock = field(default_factory=anyio.Lock)

    @property
    def call_timeout_s(self) -> float:
        return self.target.call_timeout_s if isinstance(self.target, ServerConfig) else DEFAULT_CALL_TIMEOUT_S

    @property
    def startup_timeout_s(self) -> float:
        return self.target.startup_timeout_s if isinstance(self.target, ServerConfig) else DEFAULT_STARTUP_TIMEOUT_S


class Hub:
    """A pool of MCP client connections with namespaced tools.

    Use as an async context manager: entering connects every server concurrently (bounded by each
    server's start-up timeout) and never raises for a server that fails; leaving closes them all.
    """

    def __init__(
        self,
        internal: Mapping[str, MCPServer],
        external: Sequence[ServerConfig] = (),
        *,
        log_dir: Path | None = None,
        on_failure: FailureHook | None = None,
    ) -> None:
        self._conns: dict[str, _Connection] = {name: _Connection(name, server) for name, server in internal.items()}
        for cfg in external:
            if cfg.name in self._conns:
                raise ValueError(f"server name {cfg.name!r} is taken by one of Loom's built-in servers")
            self._conns[cfg.name] = _Connection(cfg.name, cfg)
        self._log_dir = log_dir
        self._on_failure = on_failure
        self._tools: dict[str, HubTool] = {}
        self._tg: TaskGroup | None = None
        self._exit = contextlib.AsyncExitStack()

    async def __aenter__(self) -> Self:
        self._tg = await self._exit.enter_async_context(anyio.create_task_group())
        try:
            async with anyio.create_task_group() as starting:
                for conn in self._conns.values():
                    starting.start_soon(self._connect, conn)
        except BaseException:
            # cancelled (Ctrl-C) or failed while servers start: close what started, in this task
            for conn in self._conns.values():
                conn.stop.set()
            await self._exit.aclose()
            raise
        self._rebuild_tools()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for conn in self._conns.values():
            conn.stop.set()
        await self._exit.__aexit__(exc_type, exc, tb)

    @property
    def tools(self) -> list[HubTool]:
        """Every tool of every connected server, in a stable order."""
        return list(self._tools.values())

    @property
    def failures(self) -> dict[str, str]:
        """Servers that are down now, with the reason."""
        return {name: c.error for name, c in self._conns.items() if c.error is not None}

    def tool(self, name: str) -> HubTool | None:
        """Look a tool up by its namespaced name."""
        return self._tools.get(name)

    # -- connections -------------------------------------------------------------------------------

    async def _connect(self, conn: _Connection) -> None:
        """Start ``conn``'s connection task and wait until it is ready or has failed."""
        assert self._tg is not None
        conn.stop = anyio.Event()
        conn.generation += 1
        ready = anyio.Event()
        self._tg.start_soon(self._serve, conn, conn.generation, ready)
        await ready.wait()
        if conn.error is not None:
            await self._report(conn)

    async def _serve(self, conn: _Connection, generation: int, ready: anyio.Event) -> None:
        """Own one connection for its whole life; never raises (failures are recorded on ``conn``)."""
        errlog_offset = 0
        error: str | None = None
        with contextlib.ExitStack() as files:
            errlog = self._errlog(conn, files)
            if errlog is not None:
                errlog_offset = errlog.tell()
            with anyio.CancelScope(deadline=anyio.current_time() + conn.startup_timeout_s) as scope:
                try:
                    async with self._open(conn, errlog) as client:
                        tools = await _list_all_tools(client)
                        scope.deadline = math.inf
                        conn.client, conn.tools, conn.error, conn.failures = client, tools, None, 0
                        ready.set()
                        await conn.stop.wait()
                except Exception as exc:  # any failure of a server is reported, not raised
                    error = _describe(exc) + _stderr_tail(errlog, errlog_offset)
            if scope.cancelled_caught and not ready.is_set():
                error = f"did not start within {conn.startup_timeout_s:g}s" + _stderr_tail(errlog, errlog_offset)
            if conn.generation != generation:
                return  # a newer connection owns ``conn`` now
            conn.client = None
            conn.error = error or conn.error
            if conn.error is not None:
                conn.failures += 1
                backoff = _RESTART_BACKOFF_S[min(conn.failures, len(_RESTART_BACKOFF_S)) - 1]
                conn.retry_at = anyio.current_time() + backoff
            ready.set()

    def _errlog(self, conn: _Connection, files: contextlib.ExitStack) -> TextIO | None:
        if not isinstance(conn.target, ServerConfig) or conn.target.transport != "stdio" or self._log_dir is None:
            return None
        self._log_dir.mkdir(parents=True, exist_ok=True)
        return files.enter_context(open(self._log_dir / f"{conn.name}.log", "a+", encoding="utf-8"))

    def _open(self, conn: _Connection, errlog: TextIO | None) -> Client:
        target = conn.target
        if isinstance(target, MCPServer):
            return Client(target)
        if target.transport == "stdio":
            from mcp.client.stdio import stdio_client

            params = StdioServerParameters(
                command=target.command, args=list(target.args), env=target.env or None, cwd=target.cwd
            )
            return Client(stdio_client(params, errlog=errlog) if errlog is not None else params)
        return Client(_http_transport(target))

    async def _report(self, conn: _Connection) -> None:
        if self._on_failure is not None and conn.error is not None:
            await self._on_failure(conn.name, conn.error)

    def _rebuild_tools(self) -> None:
        tools: dict[str, HubTool] = {}
        for conn in self._conns.values():
            for tool in conn.tools:
                name = namespaced(conn.name, tool.name, frozenset(tools))
                tools[name] = HubTool(
                    name=name,
                    server=conn.name,
                    remote_name=tool.name,
                    description=tool.description or tool.title or tool.name,
                    input_schema=tool.input_schema,
                    annotations=tool.annotations,
                    validator=_validator(tool.input_schema),
                )
        self._tools = tools

    async def _revive(self, conn: _Connection) -> None:
        """Restart a failed server if its backoff has passed (one restart at a time)."""
        async with conn.lock:
            if conn.client is not None or anyio.current_time() < conn.retry_at:
                return
            await self._connect(conn)
            if conn.client is not None:
                self._rebuild_tools()

    # -- calls -------------------------------------------------------------------------------------

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        """Check and call a tool by its namespaced name. Never raises for a tool or server failure."""
        problem = await self.check(name, arguments)
        return problem if problem is not None else await self.dispatch(name, arguments)

    async def check(self, name: str, arguments: dict[str, Any]) -> ToolOutcome | None:
        """The error result a call would get before reaching its server, or None if it may go ahead.

        Catches unknown tools (restarting a failed server whose tools the name may belong to) and
        arguments that do not match the tool's input schema. Nothing is executed.
        """
        tool = self._tools.get(name)
        down = self._conns.get(server_of(name))
        if tool is None and down is not None and down.client is None:
            await self._revive(down)  # its tools may be back, or the model guessed a name
            tool = self._tools.get(name)
            if tool is None:
                return _unavailable(down)
        if tool is None:
            known = ", ".join(sorted(self._tools)[:30])
            return ToolOutcome(f"unknown tool {name!r}; available tools: {known}", True, "unknown_tool")
        if tool.validator is not None:
            problem = _validation_problem(tool.validator, arguments)
            if problem is not None:
                return ToolOutcome(f"invalid arguments for {name}: {problem}", True, "invalid_arguments")
        return None

    async def dispatch(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        """Send a call that :meth:`check` accepted to its server."""
        tool = self._tools[name]
        conn = self._conns[tool.server]
        if conn.client is None:
            await self._revive(conn)
        client = conn.client
        if client is None:
            return _unavailable(conn)
        try:
            with anyio.fail_after(conn.call_timeout_s):
                result = await client.call_tool(tool.remote_name, arguments)
        except TimeoutError:
            return ToolOutcome(
                f"{name} did not answer within {conn.call_timeout_s:g}s; the call was cancelled", True, "timed_out"
            )
        except MCPError as exc:
            if exc.code != mt.CONNECTION_CLOSED or "closed" not in exc.message.lower():
                return ToolOutcome(f"{name} failed: {exc}", True, "tool_error")
            return await self._lost(conn, exc)
        except Exception as exc:  # a broken connection must become an error result
            return await self._lost(conn, exc)
        return _outcome(result)

    async def _lost(self, conn: _Connection, exc: BaseException) -> ToolOutcome:
        """The connection broke during a call: report it, let the next call restart the server."""
        conn.error = f"stopped answering: {_describe(exc)}"
        conn.client = None
        conn.retry_at = anyio.current_time() + _RESTART_BACKOFF_S[0]
        conn.stop.set()
        await self._report(conn)
        return _unavailable(conn)


@contextlib.asynccontextmanager
async def _http_transport(cfg: ServerConfig) -> AsyncIterator[Any]:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient(headers=cfg.headers, timeout=cfg.call_timeout_s) as http:
        async with streamable_http_client(cfg.url, http_client=http) as streams:
            yield streams


async def _list_all_tools(client: Client) -> list[mt.Tool]:
    tools: list[mt.Tool] = []
    cursor: str | None = None
    for _ in range(100):  # a server that pages forever must not hang start-up
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _validator(schema: dict[str, Any]) -> jsonschema.protocols.Validator | None:
    try:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        cls.check_schema(schema)
        return cls(schema)
    except jsonschema.SchemaError:
        return None  # the server's schema is broken; let the server judge the arguments itself


def _validation_problem(validator: jsonschema.protocols.Validator, arguments: dict[str, Any]) -> str | None:
    errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
    if not errors:
        return None
    parts = []
    for err in errors[:3]:
        where = "/".join(str(p) for p in err.absolute_path)
        parts.append(f"{where}: {err.message}" if where else err.message)
    more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
    return "; ".join(parts) + more


def _unavailable(conn: _Connection) -> ToolOutcome:
    return ToolOutcome(
        f"MCP server {conn.name!r} is unavailable ({conn.error or 'not connected'}); "
        "try another way or tell the user it needs fixing",
        True,
        "server_unavailable",
    )


def _outcome(result: mt.CallToolResult) -> ToolOutcome:
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, mt.TextContent):
            parts.append(block.text)
        elif isinstance(block, mt.ImageContent | mt.AudioContent):
            parts.append(f"[{block.type}: {block.mime_type}]")
        elif isinstance(block, mt.EmbeddedResource):
            res = block.resource
            parts.append(res.text if isinstance(res, mt.TextResourceContents) else f"[resource {res.uri}]")
        elif isinstance(block, mt.ResourceLink):
            parts.append(f"[resource link {block.uri}]")
    text = "\n".join(parts)
    if not text and result.structured_content is not None:
        text = json.dumps(result.structured_content)
    return ToolOutcome(
        text,
        is_error=result.is_error,
        failure="tool_error" if result.is_error else None,
        structured=result.structured_content,
    )


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _describe(exc.exceptions[0])
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _stderr_tail(errlog: TextIO | None, offset: int) -> str:
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
