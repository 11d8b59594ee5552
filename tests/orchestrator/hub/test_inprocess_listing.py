"""In-process servers: listed without a round trip, connected on first use, seen as their tools/list answers."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp import types as mt
from mcp.server.mcpserver import MCPServer

from orchestrator.hub.pool import Hub
from orchestrator.runtime.session_tools import build_session_tools
from orchestrator.store.checkpoints import CheckpointStore
from servers import fs, memory, shell

pytestmark = pytest.mark.anyio


def listed(tools: list[mt.Tool]) -> list[dict[str, Any]]:
    return [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]


async def test_a_hub_sees_each_built_in_server_as_its_tools_list_answers(tmp_path: Path) -> None:
    cwd = tmp_path / "work"
    cwd.mkdir()
    async with CheckpointStore(tmp_path / "loom.db") as store:

        def build() -> dict[str, MCPServer]:
            return {
                "fs": fs.build_server([cwd]),
                "shell": shell.build_server(cwd),
                "memory": memory.build_server(tmp_path / "memory.db", project=str(cwd), session="s_1"),
                "loom": build_session_tools(store, "s_1", home=tmp_path, project=cwd),
            }

        over_mcp: dict[str, list[dict[str, Any]]] = {}
        for name, server in build().items():
            async with Client(server) as client:
                over_mcp[name] = listed((await client.list_tools()).tools)
        for _ in range(2):  # the first hub asks each kind of server server/discover, the second adopts the answer
            servers = build()
            async with Hub(servers) as hub:
                for name in servers:
                    mine = [t for t in hub.tools if t.server == name]
                    assert [t.remote_name for t in mine] == [t["name"] for t in over_mcp[name]]
                    assert [t.input_schema for t in mine] == [t["inputSchema"] for t in over_mcp[name]]
                # Structured results are still checked against the output schemas the listing carried.
                noted = await hub.call("memory__set", {"namespace": "session", "key": "k", "body": "a note"})
                assert not noted.is_error and noted.structured is not None
                listing = await hub.call("fs__list", {"path": "."})
                assert not listing.is_error and listing.structured is not None


async def test_a_server_with_its_own_middleware_is_still_asked_over_mcp(tmp_path: Path) -> None:
    methods: list[str] = []

    async def record(ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
        methods.append(ctx.method)
        return await call_next(ctx)

    def build() -> MCPServer:
        server = MCPServer("watched", middleware=[record])

        @server.tool()
        def echo(text: str) -> str:
            """Echo the text."""
            return text

        return server

    for _ in range(2):
        async with Hub({"watched": build()}) as hub:
            assert [t.name for t in hub.tools] == ["watched__echo"]
            assert (await hub.call("watched__echo", {"text": "hi"})).content == "hi"
    assert methods.count("tools/list") == 2 and methods.count("server/discover") == 2


async def test_an_in_process_server_connects_on_its_first_call_once_however_many_callers() -> None:
    entered: list[str] = []

    @contextlib.asynccontextmanager
    async def lifespan(_server: MCPServer[Any]) -> AsyncIterator[dict[str, Any]]:
        entered.append("in")
        yield {}
        entered.append("out")

    server: MCPServer[Any] = MCPServer("lazy", lifespan=lifespan)

    @server.tool()
    async def echo(text: str) -> str:
        """Echo the text."""
        await anyio.sleep(0.01)
        return text

    async with Hub({"lazy": server}) as hub:
        assert [t.name for t in hub.tools] == ["lazy__echo"] and entered == []  # listed, not connected
        assert hub.failures == {}
        results: list[str] = []

        async def call(i: int) -> None:
            results.append((await hub.call("lazy__echo", {"text": f"{i}"})).content)

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                for i in range(5):
                    tg.start_soon(call, i)
        assert sorted(results) == [f"{i}" for i in range(5)] and entered == ["in"]
        assert (await hub.call("lazy__nope", {})).is_error  # an unknown name is unknown, not a reason to reconnect
    assert entered == ["in", "out"]


async def test_a_session_closed_before_its_first_call_never_connects_its_servers() -> None:
    entered: list[str] = []

    @contextlib.asynccontextmanager
    async def lifespan(_server: MCPServer[Any]) -> AsyncIterator[dict[str, Any]]:
        entered.append("in")
        yield {}

    server: MCPServer[Any] = MCPServer("idle", lifespan=lifespan)

    @server.tool()
    def noop() -> str:
        """Do nothing."""
        return ""

    async with Hub({"idle": server}) as hub:
        assert [t.name for t in hub.tools] == ["idle__noop"]
    assert entered == []


async def test_servers_built_from_the_same_metadata_still_list_their_own_texts() -> None:
    from servers._tools import bound_tool

    def greet(name: str) -> str:
        """Say hello."""
        return f"hello {name}"

    def server(description: str) -> MCPServer:
        return MCPServer("greeter", tools=[bound_tool(greet, name="greet", description=description)])

    for description in ("Greet someone.", "Greet someone warmly.", "Greet someone."):
        async with Hub({"g": server(description)}) as hub:
            tool = hub.tool("g__greet")
            assert tool is not None and tool.description == description


async def test_deferred_built_in_servers_list_as_built_and_are_built_on_their_first_call(tmp_path: Path) -> None:
    from orchestrator.runtime.session_tools import prepare_session_tools

    cwd = tmp_path / "work"
    cwd.mkdir()
    async with CheckpointStore(tmp_path / "loom.db") as store:

        def prepare() -> dict[str, Any]:
            return {
                "fs": fs.prepare_server([cwd]),
                "shell": shell.prepare_server(cwd),
                "bare": shell.prepare_server(cwd, sandbox="off"),  # another description of the same tool
                "memory": memory.prepare_server(tmp_path / "memory.db", project=str(cwd), session="s_1"),
                "loom": prepare_session_tools(store, "s_1", home=tmp_path, project=cwd),
            }

        over_mcp: dict[str, list[dict[str, Any]]] = {}
        for name, server in prepare().items():
            async with Client(server.build()) as client:
                over_mcp[name] = listed((await client.list_tools()).tools)
        for attempt in range(2):  # the first hub may build one of each kind to list it; the second builds none
            servers = prepare()
            async with Hub(servers) as hub:
                assert attempt == 0 or not any(server.built for server in servers.values())
                for name in servers:
                    mine = [t for t in hub.tools if t.server == name]
                    assert [(t.remote_name, t.description, t.input_schema) for t in mine] == [
                        (t["name"], t["description"], t["inputSchema"]) for t in over_mcp[name]
                    ]
                noted = await hub.call("memory__set", {"namespace": "session", "key": "k", "body": "a note"})
                assert not noted.is_error and noted.structured is not None
                ran = await hub.call("bare__run", {"command": "echo hi"})
                assert not ran.is_error and "hi" in str(ran.content)
                assert attempt == 0 or [name for name, server in servers.items() if server.built] == ["bare", "memory"]


def test_preparing_a_built_in_server_raises_what_building_it_would(tmp_path: Path) -> None:
    # The state is made when the session opens, so a bad root or setting fails the session, not its first call.
    with pytest.raises(ValueError, match="not an existing directory"):
        fs.prepare_server([tmp_path / "missing"])
    with pytest.raises(ValueError, match="not an existing directory"):
        shell.prepare_server(tmp_path / "missing")
    with pytest.raises(ValueError):
        shell.prepare_server(tmp_path, sandbox="off", network=False)
