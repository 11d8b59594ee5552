"""``loom mcp`` attached to a daemon stand-in: what the SDK proxy did, the standard-library relay still does.

The driving side is the real MCP client over stdio to a real ``loom mcp`` subprocess (both protocol
eras); the daemon side is an MCP server over streamable HTTP on real uvicorn behind a bearer token,
found through its discovery file (:mod:`tests.clients.daemon_like`).
"""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path
from typing import Annotated

import anyio
import pytest
from mcp import MCPError
from mcp import types as mt
from mcp.client.context import ClientRequestContext
from mcp.server.elicitation import AcceptedElicitation, ElicitationResult
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, Resolve
from pydantic import BaseModel

from clients.relay import DaemonGone, DaemonRefused, probe
from orchestrator.daemon import read_discovery
from tests.clients.daemon_like import daemon_like, publish, static
from tests.clients.test_cli_mcp import loom_mcp, text_of
from tests.orchestrator.models.live_server import closed_port_url

pytestmark = pytest.mark.anyio

MODES = ["auto", "legacy"]
TEST_TIMEOUT_S = 40.0


class Answer(BaseModel):
    ok: bool


def ask(question: str) -> Elicit[Answer]:
    return Elicit(f"May I {question}?", Answer)


def fake_daemon(gate: threading.Event | None = None) -> MCPServer:
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
    async def gated(ctx: Context) -> str:
        # Finishes only once the caller has seen the progress: a relay that held it back until the result hangs.
        await ctx.report_progress(1, 2, "waiting for the caller")
        opened = await anyio.to_thread.run_sync(lambda: gate is not None and gate.wait(10))
        return "opened" if opened else "the caller never saw the progress"

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


@pytest.mark.parametrize("mode", MODES)
async def test_results_errors_and_progress_pass_through_unchanged(tmp_path: Path, mode: str) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    home = tmp_path / "home"
    with daemon_like(home, static(fake_daemon())), anyio.fail_after(TEST_TIMEOUT_S):
        async with loom_mcp(home, tmp_path, mode) as face:
            names = {t.name for t in (await face.client.list_tools()).tools}
            added = await face.client.call_tool("add", {"a": 2, "b": 3})
            shaped = await face.client.call_tool("shaped", {})
            stepped = await face.client.call_tool("steps", {"n": 3}, progress_callback=on_progress)
            with pytest.raises(MCPError) as refused:
                await face.client.call_tool("refuse", {})
            instructions = face.client.instructions
    assert names == {"add", "shaped", "steps", "gated", "stuck", "confirm", "refuse"}
    assert (added.structured_content, added.is_error) == ({"result": 5}, False)
    assert [c.text for c in shaped.content if isinstance(c, mt.TextContent)] == ["two", "blocks"]
    assert (shaped.structured_content, shaped.is_error) == ({"kept": [1, 2]}, True)
    assert stepped.structured_content == {"result": "done"}
    assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
    assert refused.value.error.code == mt.INVALID_PARAMS and "refused by the daemon" in refused.value.error.message
    assert instructions == "drive me"
    assert "embedded" not in face.stderr()


@pytest.mark.parametrize("mode", MODES)
async def test_progress_reaches_the_caller_while_the_call_is_still_running(tmp_path: Path, mode: str) -> None:
    gate = threading.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        gate.set()

    home = tmp_path / "home"
    with daemon_like(home, static(fake_daemon(gate))), anyio.fail_after(TEST_TIMEOUT_S):
        async with loom_mcp(home, tmp_path, mode) as face:
            result = await face.client.call_tool("gated", {}, progress_callback=on_progress)
    assert result.structured_content == {"result": "opened"}


@pytest.mark.parametrize("mode", MODES)
async def test_the_daemons_questions_are_relayed_to_the_caller_in_its_era(tmp_path: Path, mode: str) -> None:
    asked: list[str] = []

    async def on_elicit(context: ClientRequestContext, params: mt.ElicitRequestParams) -> mt.ElicitResult:
        asked.append(params.message)
        return mt.ElicitResult(action="accept", content={"ok": True})

    home = tmp_path / "home"
    with daemon_like(home, static(fake_daemon())), anyio.fail_after(TEST_TIMEOUT_S):
        async with loom_mcp(home, tmp_path, mode, "asked", elicitation_callback=on_elicit) as face:
            answered = await face.client.call_tool("confirm", {"question": "write a.txt"})
        async with loom_mcp(home, tmp_path, mode, "unasked") as face:  # cannot be asked anything
            with pytest.raises(MCPError) as unanswered:
                await face.client.call_tool("confirm", {"question": "write b.txt"})
    assert asked == ["May I write a.txt?"]
    assert (answered.structured_content, answered.is_error) == ({"result": "write a.txt: True"}, False)
    # The daemon sees the caller's own capabilities, so it says what the embedded face says: the spec's -32021.
    assert unanswered.value.error.code == mt.MISSING_REQUIRED_CLIENT_CAPABILITY


async def test_a_call_the_daemon_does_not_answer_in_time_becomes_an_error_result(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with daemon_like(home, static(fake_daemon())), anyio.fail_after(TEST_TIMEOUT_S):
        async with loom_mcp(home, tmp_path, env={"LOOM_MCP_CALL_MARGIN_S": "0.3"}) as face:
            started = anyio.current_time()
            result = await face.client.call_tool("stuck", {"wait_s": 0.2})
            elapsed = anyio.current_time() - started
            after = await face.client.call_tool("add", {"a": 1, "b": 1})
    assert result.is_error and "did not answer stuck within 0.5 s" in text_of(result)
    assert elapsed < 5
    assert after.structured_content == {"result": 2}  # the relay goes on after a slow call


@pytest.mark.parametrize("mode", MODES)
async def test_a_daemon_that_stops_is_reported_and_a_restarted_one_is_picked_up(tmp_path: Path, mode: str) -> None:
    home = tmp_path / "home"

    async def stop(daemon: contextlib.ExitStack) -> None:
        await anyio.sleep(0.5)
        await anyio.to_thread.run_sync(daemon.close)

    with anyio.fail_after(TEST_TIMEOUT_S), contextlib.ExitStack() as daemon:
        daemon.enter_context(daemon_like(home, static(fake_daemon())))
        async with loom_mcp(home, tmp_path, mode) as face:
            before = await face.client.call_tool("add", {"a": 1, "b": 2})
            async with anyio.create_task_group() as tg:
                tg.start_soon(stop, daemon)
                in_flight = await face.client.call_tool("stuck", {"wait_s": 30})
            stopped = await face.client.call_tool("add", {"a": 1, "b": 2})
            listed = await face.client.list_tools()  # the last list, while the daemon is away
            with daemon_like(home, static(fake_daemon())):  # on another port; a 2025-era session is opened again
                back = await face.client.call_tool("add", {"a": 2, "b": 2})
    assert before.structured_content == {"result": 3}
    assert in_flight.is_error and "stopped while stuck was in progress" in text_of(in_flight)
    assert stopped.is_error and "daemon is not running" in text_of(stopped) and "`loom serve`" in text_of(stopped)
    assert "add" in {t.name for t in listed.tools}
    assert back.structured_content == {"result": 4}


def test_probing_tells_a_stale_discovery_file_from_a_refused_token(tmp_path: Path) -> None:
    assert read_discovery(tmp_path) is None
    publish(tmp_path, f"{closed_port_url()}/mcp")
    stale = read_discovery(tmp_path)
    assert stale is not None
    with pytest.raises(DaemonGone):
        probe(tmp_path, stale)
    with daemon_like(tmp_path, static(fake_daemon())) as url:
        publish(tmp_path, url, token="not-the-token")
        found = read_discovery(tmp_path)
        assert found is not None
        with pytest.raises(DaemonRefused, match=r"refused the token .*HTTP 401"):
            probe(tmp_path, found)


def test_a_daemon_published_off_loopback_is_never_sent_the_token(tmp_path: Path) -> None:
    publish(tmp_path, "http://192.0.2.1:7878/mcp")
    found = read_discovery(tmp_path)
    assert found is not None
    with pytest.raises(DaemonRefused, match=r"not http://127\.0\.0\.1"):
        probe(tmp_path, found)
