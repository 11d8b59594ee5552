"""The ``mcp_access`` server: the model lists and reads other servers' resources and gets their prompts.

A session's other servers are reached through its hub (`Peers`), which is built after this server is prepared:
the hub lists this server's tools while it starts, so `AccessServer.bind` gives it the hub afterwards, before any
call can arrive. Every request goes to the named server's own handler, so a server's confinement (a file server's
roots, a notes server's scope) holds for what is read through here as for its tools.

Which servers may be read is the session's to say (`Access.bind`'s ``sees``, a child's allow-lists and servers): a
server's resources and prompts are as much of it as all its tools together, so a child reads them only where its
bounds would let it use every tool that server could have (``github__*`` or ``*``, not ``github__get_issue``). The
others are answered as if they did not exist, so a child learns nothing of servers its parent kept from it.

A person's rules for a server hold here too (`orchestrator.policy.server_reads`): a call naming a server is decided
by the policy as a read of that server, before it arrives; a listing of every server is not, so it leaves out each
server that ``gate`` (given by `Access.bind`) says reading would not simply be allowed, and says which: naming one
is then decided (denied, or asked about) like any read.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated, Protocol, TypeVar

import anyio
from mcp import Client, MCPError
from mcp import types as mt
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import ToolAnnotations
from pydantic import Field

from servers._tools import Binding, DeferredServer
from servers._version import loom_version
from servers.mcp_access._render import prompt_blocks, prompts_text, resource_blocks, resources_text

__all__ = ["NAME", "AccessServer", "Gate", "Peers", "prepare_server"]

NAME = "mcp_access"
"""The server's name: one of Loom's reserved built-in names."""
REQUEST_TIMEOUT_S = 60.0
"""How long one request to another server may take before the model is told it timed out."""
_READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, destructive_hint=False, open_world_hint=True)
_T = TypeVar("_T")
Gate = Callable[[str], tuple[str, str]]
"""A server's raw name -> the policy's verdict on reading it (``allow``, ``ask``, ``deny``) and the reason."""
_NO_ARGUMENTS: dict[str, str] = Field(default_factory=dict)


class Peers(Protocol):
    """The session's other servers, as its hub reaches them."""

    def server_names(self) -> list[str]:
        """Every server of the session."""
        ...

    async def client(self, server: str) -> Client:
        """A connected client of ``server`` (connecting it on demand); raises with the reason when it cannot."""
        ...

    def capabilities(self, server: str) -> mt.ServerCapabilities | None:
        """What ``server`` declared, if it is connected now (without connecting it)."""
        ...


# Plain strings with "" for "none": an optional ``str | None`` costs an ``anyOf`` in every request's tool list.
_Server = Annotated[str, Field(description="as list_resources or list_prompts name it")]
_AnyServer = Annotated[str, Field(description="omit for every server")]
_Cursor = Annotated[str, Field(description="from the previous page")]


class Access:
    """One session's view of its other servers; `bind` gives it the session's hub."""

    def __init__(self) -> None:
        self._peers: Peers | None = None
        self._sees: Callable[[str], bool] | None = None
        self._own: frozenset[str] = frozenset()
        self._gate: Gate | None = None

    def bind(
        self,
        peers: Peers,
        *,
        sees: Callable[[str], bool] | None = None,
        own: frozenset[str] = frozenset(),
        gate: Gate | None = None,
    ) -> None:
        """Reach ``peers``.

        Args:
            peers: The session's servers.
            sees: Whether the session may use a namespaced tool name (a child's bounds); None: any. A server is
                readable when ``sees`` grants ``{server}__*``: a glob in an allow-list that covers every tool
                name of the server matches that name too, a single tool's name does not.
            own: Loom's built-in servers: they may be named, but listing every server leaves them out, since
                whatever they offer their tools give already (and listing them would start each one).
            gate: The session's policy on reading a server (`orchestrator.policy.server_reads.listing_gate`); a
                listing of every server leaves out those it does not allow. None: every server is listed.
        """
        self._peers, self._sees, self._own, self._gate = peers, sees, own, gate

    def visible(self, sees: Callable[[str], bool] | None) -> Callable[[str], bool]:
        """``sees`` (the session's tool visibility; None: every tool), less this server's tools no server answers.

        Give it to the hub as its ``visible``: the hub asks it when it builds its tool list, after its servers have
        connected and again whenever a server's tools change, so ``read_resource`` is offered while some readable
        server (Loom's own left out) declares ``resources``, and ``get_prompt`` while one declares ``prompts``:
        a session whose servers have only tools pays for none of these in its requests.
        """

        def check(name: str) -> bool:
            if sees is not None and not sees(name):
                return False
            kind = _KINDS.get(name)
            return kind is None or self._peers is None or any(self._declares(n, kind) for n in self._listable())

        return check

    def _declares(self, server: str, kind: str) -> bool:
        assert self._peers is not None
        return getattr(self._peers.capabilities(server), kind, None) is not None

    def _listable(self) -> list[str]:
        return [name for name in self._readable() if name not in self._own]

    def _readable(self) -> list[str]:
        if self._peers is None:
            raise ToolError("this server is not connected to a session's servers yet; try again")
        names = [n for n in self._peers.server_names() if n != NAME]
        sees = self._sees
        return names if sees is None else [n for n in names if sees(f"{_sanitize(n)}__*")]

    async def _client(self, server: str) -> Client:
        readable = self._readable()
        if server not in readable:
            known = ", ".join(readable) or "none"
            raise ToolError(f"no server named {server!r} that this session can read; the servers are: {known}")
        assert self._peers is not None
        try:
            return await self._peers.client(server)
        except Exception as exc:  # the hub's reason, in the model's terms
            raise ToolError(f"server {server!r} is unavailable: {exc}") from exc

    async def _ask(self, server: str, what: str, request: Callable[[], Awaitable[_T]]) -> _T:
        try:
            with anyio.fail_after(REQUEST_TIMEOUT_S):
                return await request()
        except TimeoutError:
            raise ToolError(f"server {server!r} did not answer {what} within {REQUEST_TIMEOUT_S:g}s") from None
        except MCPError as exc:
            if exc.code == mt.METHOD_NOT_FOUND:
                raise ToolError(f"server {server!r} does not support {what}") from exc
            raise ToolError(f"server {server!r} refused {what}: {exc.message}") from exc

    async def _offering(self, server: str, kind: str) -> Client:
        """The client of a server that declares the ``resources`` or ``prompts`` capability."""
        client = await self._client(server)
        capabilities = client.server_capabilities
        if getattr(capabilities, kind) is None:
            others = await self._declaring(kind)
            hint = f"; servers that do: {', '.join(others)}" if others else ""
            raise ToolError(f"server {server!r} offers no {kind} (it does not declare the {kind} capability){hint}")
        return client

    def _withheld(self) -> dict[str, str]:
        """Listable servers the policy would not simply let be read, with why (for a listing of every server)."""
        gate = self._gate
        if gate is None:
            return {}
        withheld: dict[str, str] = {}
        for name in self._listable():
            verdict, reason = gate(name)
            if verdict == "deny":
                withheld[name] = f"{name!r} ({reason})"
            elif verdict != "allow":  # ask, or anything unknown: a person decides, when it is named
                withheld[name] = f"{name!r} (a person is asked before it is read: {reason}; name it to list it)"
        return withheld

    async def _declaring(self, kind: str) -> list[str]:
        """Readable servers (Loom's own and those the policy withholds left out) that declare ``kind``."""
        withheld = self._withheld()
        names = [name for name in self._listable() if name not in withheld]
        declares = dict.fromkeys(names, False)

        async def probe(name: str) -> None:
            try:
                client = await self._client(name)
            except ToolError:
                return  # down: left out of the listing, as if it had nothing
            declares[name] = getattr(client.server_capabilities, kind) is not None

        # At once: a server being restarted waits its start-up limit, and must not make the others wait in turn.
        async with anyio.create_task_group() as tg:
            for name in names:
                tg.start_soon(probe, name)
        return [name for name in names if declares[name]]

    async def list_resources(self, server: _AnyServer = "", cursor: _Cursor = "") -> mt.CallToolResult:
        """List a server's resources and resource templates."""
        if not server:
            if cursor:
                raise ToolError("a cursor belongs to one server's listing: pass that server too")
            return await self._every("resources", self._resources_page)
        return _text(await self._resources_page(server, cursor or None))

    async def _resources_page(self, server: str, cursor: str | None = None) -> str:
        client = await self._offering(server, "resources")
        page = await self._ask(server, "resources/list", lambda: client.list_resources(cursor=cursor))
        templates: list[mt.ResourceTemplate] = []
        if cursor is None:
            try:
                found = await self._ask(server, "resources/templates/list", client.list_resource_templates)
                templates = list(found.resource_templates)
            except ToolError:
                pass  # templates are optional: a server without them still has its resources listed
        return resources_text(server, list(page.resources), templates, page.next_cursor)

    async def _every(self, kind: str, page: Callable[[str], Awaitable[str]]) -> mt.CallToolResult:
        servers = await self._declaring(kind)
        # Named, not hidden: the model knows these servers from their tools, and is told how to reach them.
        left_out = list(self._withheld().values())
        note = "Left out of this listing by the session's policy: " + "; ".join(left_out) if left_out else ""
        if not servers:
            return _text("\n\n".join(filter(None, [f"No server of this session offers {kind}.", note])))
        texts: list[str] = []
        for name in servers:
            try:
                texts.append(await page(name))
            except ToolError as exc:
                texts.append(str(exc))
        return _text("\n\n".join(filter(None, [*texts, note])))

    async def read_resource(self, server: _Server, uri: str) -> mt.CallToolResult:
        """Read a server's resource by URI (a listed one, or a template filled in)."""
        scheme, colon, rest = uri.partition(":")
        if not colon or not scheme or not rest or any(c.isspace() for c in uri):
            raise ToolError(
                f"{uri!r} is not a resource URI: one has a scheme and no spaces, like file:///path or docs://name; "
                f"list_resources shows {server!r}'s"
            )
        client = await self._offering(server, "resources")
        result = await self._ask(server, f"reading {uri}", lambda: client.read_resource(uri))
        return mt.CallToolResult(content=resource_blocks(server, uri, result))

    async def list_prompts(self, server: _AnyServer = "", cursor: _Cursor = "") -> mt.CallToolResult:
        """List a server's prompts and their arguments."""
        if not server:
            if cursor:
                raise ToolError("a cursor belongs to one server's listing: pass that server too")
            return await self._every("prompts", self._prompts_page)
        return _text(await self._prompts_page(server, cursor or None))

    async def _prompts_page(self, server: str, cursor: str | None = None) -> str:
        client = await self._offering(server, "prompts")
        page = await self._ask(server, "prompts/list", lambda: client.list_prompts(cursor=cursor))
        return prompts_text(server, list(page.prompts), page.next_cursor)

    async def get_prompt(
        self,
        server: _Server,
        name: str,
        arguments: dict[str, str] = _NO_ARGUMENTS,
    ) -> mt.CallToolResult:
        """Get a server's prompt, its arguments filled in, as the messages it makes."""
        client = await self._offering(server, "prompts")
        result = await self._ask(server, f"prompt {name!r}", lambda: client.get_prompt(name, arguments or None))
        return mt.CallToolResult(content=prompt_blocks(server, name, result))


_KINDS = {
    f"{NAME}__{tool}": kind
    for tool, kind in (
        ("list_resources", "resources"),
        ("read_resource", "resources"),
        ("list_prompts", "prompts"),
        ("get_prompt", "prompts"),
    )
}
"""This server's tools by namespaced name, and the capability a server must declare for each to be of use."""


def _sanitize(server: str) -> str:
    """A server name as namespaced tool names spell it (as ``orchestrator.hub.names.sanitize``: not imported)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", server) or "_"


def _text(text: str) -> mt.CallToolResult:
    return mt.CallToolResult(content=[mt.TextContent(type="text", text=text)])


class AccessServer(DeferredServer):
    """The ``mcp_access`` server of one session, built on its first call; `bind` it to the session's hub."""

    def __init__(self, access: Access, bindings: Sequence[Binding], make: Callable[[list[Tool]], MCPServer]) -> None:
        super().__init__(NAME, bindings, make)
        self._access = access

    def bind(
        self,
        peers: Peers,
        *,
        sees: Callable[[str], bool] | None = None,
        own: frozenset[str] = frozenset(),
        gate: Gate | None = None,
    ) -> None:
        """Reach the session's servers through ``peers`` (see `Access.bind`)."""
        self._access.bind(peers, sees=sees, own=own, gate=gate)

    def visible(self, sees: Callable[[str], bool] | None) -> Callable[[str], bool]:
        """The hub's ``visible`` for this session (see `Access.visible`)."""
        return self._access.visible(sees)


_INSTRUCTIONS = "Other MCP servers' resources and prompts: list and read resources, list and get prompts."


def prepare_server() -> AccessServer:
    """The ``mcp_access`` server for one session, unbound; its tools' schemas are built once per process."""
    access = Access()

    def make(bound: list[Tool]) -> MCPServer:
        return MCPServer(NAME, version=loom_version(), instructions=_INSTRUCTIONS, tools=bound, log_level="WARNING")

    bindings = [
        Binding(access.list_resources, "list_resources", annotations=_READ_ONLY),
        Binding(access.read_resource, "read_resource", annotations=_READ_ONLY),
        Binding(access.list_prompts, "list_prompts", annotations=_READ_ONLY),
        Binding(access.get_prompt, "get_prompt", annotations=_READ_ONLY),
    ]
    return AccessServer(access, bindings, make)
