"""Time limits per server and per tool, and cancellation that reaches a real stdio server."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import anyio
import pytest
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

from orchestrator.config import DEFAULT_CALL_TIMEOUT_S, ServerConfig
from orchestrator.hub.pool import Hub
from orchestrator.hub.timeouts import ARGUMENT_GRACE_S, MAX_ARGUMENT_TIMEOUT_S, call_timeout

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[3]
LIMITS_SERVER = str(Path(__file__).parents[1] / "limits_test_server.py")


def limits_server(
    record: Path, *, timeout_s: float = 10, tool_timeouts: dict[str, float] | None = None
) -> ServerConfig:
    """The limits test server as an ``mcpServers`` entry would describe it."""
    return ServerConfig(
        name="ext",
        transport="stdio",
        command=sys.executable,
        args=(LIMITS_SERVER,),
        env={"PYTHONPATH": str(REPO), "TEST_SERVER_RECORD_FILE": str(record)},
        startup_timeout_s=20,
        call_timeout_s=timeout_s,
        tool_timeouts_s=tool_timeouts or {},
    )


def lines_of(record: Path) -> list[str]:
    """What the server has recorded so far (a small file, read at once)."""
    return record.read_text().splitlines() if record.exists() else []


async def recorded(record: Path, line: str, within_s: float = 10) -> list[str]:
    """Wait (bounded) until the server has recorded ``line``; return everything it recorded."""
    with anyio.fail_after(within_s):
        while True:
            lines = lines_of(record)
            if line in lines:
                return lines
            await anyio.sleep(0.05)


def inline_server() -> MCPServer:
    server = MCPServer("inline", log_level="WARNING")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    async def slow(seconds: float) -> str:
        """Sleep for a while."""
        await anyio.sleep(seconds)
        return "slow done"

    return server


async def test_the_hubs_timeout_cancels_the_call_on_the_server(tmp_path: Path) -> None:
    record = tmp_path / "record.txt"
    cfg = limits_server(record, tool_timeouts={"sleepy": 0.5})
    async with Hub({}, [cfg], log_dir=tmp_path) as hub:
        started = time.monotonic()
        outcome = await hub.call("ext__sleepy", {"tag": "t1", "seconds": 30})
        elapsed = time.monotonic() - started
        lines = await recorded(record, "cancelled t1")
        after = await hub.call("ext__wait", {"seconds": 0})  # the connection survives a timeout
    assert outcome.is_error and outcome.failure == "timed_out"
    assert "within 0.5s and was cancelled" in outcome.content
    assert "may have done part" not in outcome.content  # sleepy is read-only: nothing to check
    assert elapsed < 5
    assert lines == ["start t1", "cancelled t1"]
    assert after.content == "waited 0"


async def test_cancelling_the_caller_cancels_the_call_on_the_server(tmp_path: Path) -> None:
    record = tmp_path / "record.txt"
    async with Hub({}, [limits_server(record)], log_dir=tmp_path) as hub:
        with anyio.fail_after(15):
            async with anyio.create_task_group() as tg:  # as a run's cancel does to its tool calls
                tg.start_soon(hub.call, "ext__sleepy", {"tag": "t2", "seconds": 30})
                await recorded(record, "start t2")
                tg.cancel_scope.cancel()
        lines = await recorded(record, "cancelled t2")
    assert lines == ["start t2", "cancelled t2"]


async def test_built_in_servers_get_limits_by_tool_or_server_name() -> None:
    async with Hub({"calc": inline_server()}, timeouts={"calc__slow": 0.2}) as hub:
        outcome = await hub.call("calc__slow", {"seconds": 30})
        fine = await hub.call("calc__add", {"a": 1, "b": 2})
    assert outcome.failure == "timed_out" and "within 0.2s" in outcome.content
    assert "may have done part of its work" in outcome.content  # not read-only: the model should check
    assert not fine.is_error
    async with Hub({"calc": inline_server()}, timeouts={"calc": 0.2}) as hub:
        assert (await hub.call("calc__slow", {"seconds": 30})).failure == "timed_out"


async def test_the_most_specific_limit_wins(tmp_path: Path) -> None:
    cfg = limits_server(tmp_path / "record.txt", timeout_s=11, tool_timeouts={"sleepy": 3, "wait": 5})
    timeouts = {"ext__wait": 4, "ext": 9, "calc": 7, "calc__add": 2}
    async with Hub({"calc": inline_server()}, [cfg], log_dir=tmp_path, timeouts=timeouts) as hub:
        limits = {t.name: t.timeout_s for t in hub.tools}
    assert limits["ext__wait"] == 4  # top-level, by tool, beats the entry's toolTimeouts
    assert limits["ext__sleepy"] == 3  # the entry's toolTimeouts beat the top-level server limit
    assert limits["ext__crash_once"] == 9  # the top-level server limit beats the entry's timeout
    assert (limits["calc__add"], limits["calc__slow"]) == (2, 7)
    async with Hub({"calc": inline_server()}, [cfg], log_dir=tmp_path) as hub:
        limits = {t.name: t.timeout_s for t in hub.tools}
    assert (limits["ext__crash_once"], limits["calc__slow"]) == (11, DEFAULT_CALL_TIMEOUT_S)


async def test_a_timeout_s_argument_is_never_cut_short_by_the_hub(tmp_path: Path) -> None:
    cfg = limits_server(tmp_path / "record.txt", tool_timeouts={"wait": 0.3})
    async with Hub({}, [cfg], log_dir=tmp_path) as hub:
        asked = await hub.call("ext__wait", {"seconds": 0.8, "timeout_s": 1})
        not_asked = await hub.call("ext__wait", {"seconds": 5})
    assert (asked.is_error, asked.content) == (False, "waited 0.8")
    assert not_asked.failure == "timed_out" and "pass a larger timeout_s" in not_asked.content


def test_call_timeout_stretches_only_for_a_declared_numeric_timeout_s() -> None:
    schema = {"type": "object", "properties": {"command": {}, "timeout_s": {}}}
    assert call_timeout(60, schema, {"timeout_s": 300}) == 300 + ARGUMENT_GRACE_S
    assert call_timeout(600, schema, {"timeout_s": 30}) == 600  # never shorter than configured
    assert call_timeout(60, schema, {"timeout_s": True}) == 60
    assert call_timeout(60, schema, {"timeout_s": 1e9}) == MAX_ARGUMENT_TIMEOUT_S + ARGUMENT_GRACE_S
    assert call_timeout(60, {"type": "object", "properties": {}}, {"timeout_s": 300}) == 60
