from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

from orchestrator.config import ServerConfig
from orchestrator.hub.pool import Hub

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[3]
SERVER_SCRIPT = str(Path(__file__).parents[1] / "stdio_test_server.py")


def inline_server(calls: list[int]) -> MCPServer:
    server = MCPServer("inline", log_level="WARNING")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def add(a: int, b: int) -> int:
        """Add two integers."""
        calls.append(a + b)
        return a + b

    return server


def external(name: str, tmp_path: Path, **env: str) -> ServerConfig:
    return ServerConfig(
        name=name,
        transport="stdio",
        command=sys.executable,
        args=(SERVER_SCRIPT,),
        env={"PYTHONPATH": str(REPO), **env},
        startup_timeout_s=20,
        call_timeout_s=10,
    )


async def test_internal_tools_are_namespaced_and_called_in_process() -> None:
    calls: list[int] = []
    async with Hub({"calc": inline_server(calls)}) as hub:
        assert [t.name for t in hub.tools] == ["calc__add"]
        assert hub.tools[0].annotations is not None and hub.tools[0].annotations.read_only_hint
        outcome = await hub.call("calc__add", {"a": 2, "b": 3})
    assert (outcome.is_error, outcome.content, outcome.structured) == (False, "5", {"result": 5})
    assert calls == [5]


async def test_invalid_arguments_are_refused_before_the_server_sees_them() -> None:
    calls: list[int] = []
    async with Hub({"calc": inline_server(calls)}) as hub:
        outcome = await hub.call("calc__add", {"a": "two"})
    assert outcome.is_error and outcome.failure == "invalid_arguments"
    assert "'b' is a required property" in outcome.content and "a: 'two' is not of type 'integer'" in outcome.content
    assert calls == []


async def test_unknown_tool_lists_what_exists() -> None:
    async with Hub({"calc": inline_server([])}) as hub:
        outcome = await hub.call("calc__mul", {"a": 1, "b": 2})
    assert outcome.failure == "unknown_tool" and "calc__add" in outcome.content


async def test_external_stdio_server_from_config(tmp_path: Path) -> None:
    async with Hub({}, [external("ext", tmp_path)], log_dir=tmp_path) as hub:
        names = sorted(t.name for t in hub.tools)
        assert names == ["ext__die", "ext__echo", "ext__touch", "ext__touch_then_die", "ext__weird_name_with_spaces"]
        assert all(len(n) <= 64 for n in names)
        echo = await hub.call("ext__echo", {"text": "ab", "times": 2})
        weird = await hub.call("ext__weird_name_with_spaces", {})
    assert echo.content == "abab" and weird.content == "weird ok"


async def test_server_that_crashes_on_start_reports_why_and_its_tools_fail_softly(tmp_path: Path) -> None:
    failures: list[tuple[str, str]] = []

    async def on_failure(server: str, error: str) -> None:
        failures.append((server, error))

    cfg = external("bad", tmp_path, TEST_SERVER_CRASH_ON_START="1")
    async with Hub({"calc": inline_server([])}, [cfg], log_dir=tmp_path, on_failure=on_failure) as hub:
        assert [t.name for t in hub.tools] == ["calc__add"]
        assert "bad" in hub.failures
        outcome = await hub.call("bad__anything", {})
        still_fine = await hub.call("calc__add", {"a": 1, "b": 1})
    assert failures and failures[0][0] == "bad"
    assert "configured to crash on start" in failures[0][1]  # the child's stderr is quoted
    assert outcome.is_error and outcome.failure == "server_unavailable" and "'bad'" in outcome.content
    assert not still_fine.is_error


async def test_missing_command_fails_softly(tmp_path: Path) -> None:
    cfg = ServerConfig(name="ghost", transport="stdio", command="/nonexistent/loom-test-binary", startup_timeout_s=5)
    async with Hub({}, [cfg], log_dir=tmp_path) as hub:
        assert "ghost" in hub.failures
        outcome = await hub.call("ghost__x", {})
    assert outcome.failure == "server_unavailable"


async def test_server_dying_mid_call_becomes_an_error_result_then_restarts(tmp_path: Path) -> None:
    count = tmp_path / "count.txt"
    async with Hub({}, [external("ext", tmp_path, TEST_SERVER_COUNT_FILE=str(count))], log_dir=tmp_path) as hub:
        died = await hub.call("ext__die", {})
        assert died.is_error and died.failure == "outcome_unknown"
        assert "outcome is unknown" in died.content and "may already have taken effect" in died.content
        with anyio.fail_after(15):
            while True:  # the restart backoff is 1 s; bounded by fail_after
                again = await hub.call("ext__touch", {"tag": "after-restart"})
                if not again.is_error:
                    break
                await anyio.sleep(0.3)
    assert again.content == "touched after-restart"
    assert count.read_text().splitlines() == ["after-restart"]


async def test_external_streamable_http_server_from_config(tmp_path: Path) -> None:
    from tests.orchestrator.models.live_server import serve

    calls: list[int] = []
    app = inline_server(calls).streamable_http_app()
    with serve(app, lifespan=True) as origin:
        cfg = ServerConfig(
            name="remote", transport="http", url=f"{origin}/mcp", startup_timeout_s=10, call_timeout_s=10
        )
        async with Hub({}, [cfg]) as hub:
            assert [t.name for t in hub.tools] == ["remote__add"]
            outcome = await hub.call("remote__add", {"a": 20, "b": 22})
    assert (outcome.is_error, outcome.content) == (False, "42")
    assert calls == [42]


async def test_unreachable_http_server_fails_softly(tmp_path: Path) -> None:
    from tests.orchestrator.models.live_server import closed_port_url

    cfg = ServerConfig(name="gone", transport="http", url=f"{closed_port_url()}/mcp", startup_timeout_s=5)
    async with Hub({}, [cfg]) as hub:
        assert "gone" in hub.failures
        outcome = await hub.call("gone__add", {"a": 1, "b": 1})
    assert outcome.failure == "server_unavailable"
