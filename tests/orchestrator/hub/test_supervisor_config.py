"""``mcpServers`` entries the supervisor honours (``disabled``, ``type``: the legacy SSE transport); built-ins."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from mcp.server.mcpserver import MCPServer

from orchestrator.config import parse_config
from orchestrator.hub.pool import Hub, ServerUnavailableError
from tests.orchestrator.hub.supervised import REPO, SCRIPT, States, http_server

pytestmark = pytest.mark.anyio


def servers(tmp_path: Path, entries: dict[str, object]) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"mcpServers": entries}))
    return path


async def test_a_disabled_server_is_listed_as_stopped_and_never_started(tmp_path: Path) -> None:
    path = servers(
        tmp_path,
        {
            "off": {
                "command": sys.executable,
                "args": [SCRIPT, "stdio"],
                "env": {"PYTHONPATH": str(REPO)},
                "disabled": True,
            }
        },
    )
    cfg = parse_config(path.read_text(), path)
    states = States()
    async with Hub({}, cfg.servers, log_dir=tmp_path / "logs", on_state=states) as hub:
        [health] = hub.statuses()
        outcome = await hub.call("off__echo", {"text": "hi"})
        names = hub.server_names()
        with pytest.raises(ServerUnavailableError, match="disabled"):
            await hub.client("off")
    assert (health.name, health.state, health.transport, health.tools) == ("off", "stopped", "stdio", 0)
    assert outcome.failure == "server_unavailable" and "disabled in its config" in outcome.content
    assert names == [] and states.seen == []
    assert not (tmp_path / "logs" / "off.log").exists()  # its process never ran


async def test_a_legacy_sse_server_connects_and_serves_a_call(tmp_path: Path) -> None:
    with http_server(tmp_path, "sse") as server:
        path = servers(tmp_path, {"old": {"type": "sse", "url": f"http://127.0.0.1:{server.port}/sse"}})
        [cfg] = parse_config(path.read_text(), path).servers
        states = States()
        async with Hub({}, [cfg], on_state=states) as hub:
            echoed = await hub.call("old__echo", {"text": "over sse"})
            [health] = hub.statuses()
    assert cfg.transport == "sse"
    assert echoed.content == "over sse"
    assert (health.transport, states.states) == ("sse", ["starting", "ready", "stopped"])


async def test_without_type_sse_would_not_be_guessed_and_fails_softly_with_the_reason(tmp_path: Path) -> None:
    with http_server(tmp_path, "sse") as server:
        path = servers(tmp_path, {"old": {"url": f"http://127.0.0.1:{server.port}/sse", "startupTimeout": 5}})
        [cfg] = parse_config(path.read_text(), path).servers
        async with Hub({}, [cfg]) as hub:
            [health] = hub.statuses()
    assert cfg.transport == "http" and health.state == "failed" and health.last_error


async def test_built_in_servers_are_listed_ready_with_their_tools_and_report_no_states() -> None:
    inline = MCPServer("inline", log_level="WARNING")

    @inline.tool()
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    states = States()
    async with Hub({"calc": inline}, on_state=states) as hub:
        await hub.call("calc__add", {"a": 1, "b": 2})
        client = await hub.client("calc")
        listed = await client.list_tools()
        [health] = hub.statuses()
    assert (health.transport, health.state, health.tools) == ("in-process", "ready", 1)
    assert [t.name for t in listed.tools] == ["add"] and states.seen == []
