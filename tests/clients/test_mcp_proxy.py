"""The forwarding server of ``loom mcp``, in-process, against a daemon stand-in on real uvicorn.

The driving side is the real MCP client connected to the proxy in-process (both protocol eras); the
daemon side is an MCP server over streamable HTTP behind a bearer token, found by its discovery file.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated

import anyio
import pytest
from mcp import Client, MCPError
from mcp import types as mt
from mcp.client.context import ClientRequestContext
from mcp.server.elicitation import AcceptedElicitation, ElicitationResult
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, Resolve
from pydantic import BaseModel

from clients.daemon_link import DaemonGone, DaemonLink, DaemonRefused
from clients.mcp_proxy import build_proxy
from orchestrator.daemon import read_discovery
from tests.clients.daemon_like import daemon_like, publish, static
from tests.orchestrator.models.live_server import closed_port_url

pytestmark = pytest.mark.anyio

MODES = ["auto", "legacy"]


class Answer(BaseModel):
    ok: bool


def ask(question: str) -> Elicit[Answer]:
    return Elicit(f"May I {question}?", Answer)


def fake_daemon() -> MCPServer:
    daemon = MCPServer("fake-daemon", instructions="drive me")

    @daemon.tool()
    def add(a: int, b: int) -> int:
        return a + b

    @daemon.tool()
    def shaped() -> mt.CallToolResult:
        return mt.CallToolResult(
            content=[mt.TextContent(type="text", text="two"), mt.TextContent(type="text", text="blocks")],
            structured_content={"kept": [1, 2]},
            is_error=True,
        )

    @daemon.tool()
    async def steps(n: int, ctx: Context) -> str:
        for i in range(n):
            await ctx.report_progress(i + 1, n, f"step {i + 1}")
        return "done"

    @daemon.tool()
    async def stuck(wait_s: float = 0.0) -> str:
        await anyio.sleep(3600)
        return "never"

    @daemon.tool()
    async def confirm(question: str, answer: Annotated[ElicitationResult[Answer], Resolve(ask)]) -> str:
        return f"{question}: {answer.data.ok}" if isinstance(answer, AcceptedElicitation) else answer.action

    @daemon.tool()
    def refuse() -> str:
        raise MCPError(code=mt.INVALID_PARAMS, message="refused by the daemon")

    return daemon


@contextlib.asynccontextmanager
async def proxied(home: Path, mode: str, call_margin_s: float = 30.0) -> AsyncIterator[Client]:
    async with DaemonLink(home, call_margin_s=call_margin_s) as link:
        await link.connect()
        async with Client(build_proxy(link), mode=mode) as client:
            yield client


@pytest.mark.parametrize("mode", MODES)
async def test_results_errors_and_progress_pass_through_unchanged(tmp_path: Path, mode: str) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    with daemon_like(tmp_path, static(fake_daemon())), anyio.fail_after(30):
        async with proxied(tmp_path, mode) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            added = await client.call_tool("add", {"a": 2, "b": 3})
            shaped = await client.call_tool("shaped", {})
            stepped = await client.call_tool("steps", {"n": 3}, progress_callback=on_progress)
            with pytest.raises(MCPError) as refused:
                await client.call_tool("refuse", {})
            instructions = client.instructions
    assert names == {"add", "shaped", "steps", "stuck", "confirm", "refuse"}
    assert (added.structured_content, added.is_error) == ({"result": 5}, False)
    assert [c.text for c in shaped.content if isinstance(c, mt.TextContent)] == ["two", "blocks"]
    assert (shaped.structured_content, shaped.is_error) == ({"kept": [1, 2]}, True)
    assert stepped.structured_content == {"result": "done"}
    assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
    assert refused.value.error.code == mt.INVALID_PARAMS and "refused by the daemon" in refused.value.error.message
    assert instructions == "drive me"


@pytest.mark.parametrize("mode", MODES)
async def test_the_daemons_questions_are_relayed_to_the_caller_in_its_era(tmp_path: Path, mode: str) -> None:
    asked: list[str] = []

    async def on_elicit(context: ClientRequestContext, params: mt.ElicitRequestParams) -> mt.ElicitResult:
        asked.append(params.message)
        return mt.ElicitResult(action="accept", content={"ok": True})

    with daemon_like(tmp_path, static(fake_daemon())), anyio.fail_after(30):
        async with DaemonLink(tmp_path) as link:
            await link.connect()
            async with Client(build_proxy(link), mode=mode, elicitation_callback=on_elicit) as client:
                answered = await client.call_tool("confirm", {"question": "write a.txt"})
            async with Client(build_proxy(link), mode="legacy") as client:  # cannot be asked anything
                unanswered = await client.call_tool("confirm", {"question": "write b.txt"})
    assert asked == ["May I write a.txt?"]
    assert (answered.structured_content, answered.is_error) == ({"result": "write a.txt: True"}, False)
    assert unanswered.is_error and "your MCP client could not answer" in _text(unanswered)


async def test_a_call_the_daemon_does_not_answer_in_time_becomes_an_error_result(tmp_path: Path) -> None:
    with daemon_like(tmp_path, static(fake_daemon())), anyio.fail_after(30):
        async with proxied(tmp_path, "auto", call_margin_s=0.3) as client:
            started = anyio.current_time()
            result = await client.call_tool("stuck", {"wait_s": 0.2})
            elapsed = anyio.current_time() - started
            after = await client.call_tool("add", {"a": 1, "b": 1})
    assert result.is_error and "did not answer stuck within 0.5 s" in _text(result)
    assert elapsed < 5
    assert after.structured_content == {"result": 2}  # the connection survives a slow call


async def test_a_daemon_that_stops_is_reported_and_a_restarted_one_is_picked_up(tmp_path: Path) -> None:
    async def stop(daemon: contextlib.ExitStack) -> None:
        await anyio.sleep(0.5)
        await anyio.to_thread.run_sync(daemon.close)

    with anyio.fail_after(40), contextlib.ExitStack() as daemon:
        daemon.enter_context(daemon_like(tmp_path, static(fake_daemon())))
        async with proxied(tmp_path, "auto") as client:
            before = await client.call_tool("add", {"a": 1, "b": 2})
            async with anyio.create_task_group() as tg:
                tg.start_soon(stop, daemon)
                in_flight = await client.call_tool("stuck", {"wait_s": 30})
            stopped = await client.call_tool("add", {"a": 1, "b": 2})
            with daemon_like(tmp_path, static(fake_daemon())):
                back = await client.call_tool("add", {"a": 2, "b": 2})
    assert before.structured_content == {"result": 3}
    assert in_flight.is_error and "stopped while stuck was in progress" in _text(in_flight)
    assert stopped.is_error and "daemon is not running" in _text(stopped) and "`loom serve`" in _text(stopped)
    assert back.structured_content == {"result": 4}


async def test_connecting_tells_a_stale_discovery_file_from_a_refused_token(tmp_path: Path) -> None:
    with anyio.fail_after(30):
        assert read_discovery(tmp_path) is None
        publish(tmp_path, f"{closed_port_url()}/mcp")
        async with DaemonLink(tmp_path) as link:
            with pytest.raises(DaemonGone):
                await link.connect()
        with daemon_like(tmp_path, static(fake_daemon())) as url:
            publish(tmp_path, url, token="not-the-token")
            async with DaemonLink(tmp_path) as link:
                with pytest.raises(DaemonRefused, match=r"refused the token .*HTTP 401"):
                    await link.connect()


def _text(result: mt.CallToolResult) -> str:
    return " ".join(c.text for c in result.content if isinstance(c, mt.TextContent))
