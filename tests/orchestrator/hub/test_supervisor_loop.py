"""Supervision seen from a run: a session over a real runtime and store, a scripted model, real external servers.

A server that adds a tool during a run has it offered in the model's next request; a server that is killed while
the session idles is ``failed`` then ``ready`` in the session's own event log, with no call made.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import anyio
import pytest

from orchestrator.config import ServerConfig
from orchestrator.events import ServerFailed, ServerStateChanged, ToolCallFinished
from orchestrator.models.scripted import Script as ScriptModel
from orchestrator.models.scripted import ScriptedModel, ScriptedTurn
from orchestrator.runtime.embedded import embedded_runtime
from tests.orchestrator.hub.supervised import http_server, stdio_config

pytestmark = pytest.mark.anyio


def model(*calls: tuple[str, dict[str, object]]) -> ScriptedModel:
    """One tool call per turn, then a final answer."""
    turns = [ScriptedTurn.model_validate({"tool_calls": [{"name": n, "arguments": a}]}) for n, a in calls]
    return ScriptedModel(ScriptModel(turns=[*turns, ScriptedTurn(text="done")]))


def offered(scripted: ScriptedModel) -> list[list[str]]:
    return [[t.name for t in request.tools or ()] for request in scripted.requests]


async def run_growing(tmp_path: Path, cfg: ServerConfig, *between: tuple[str, dict[str, object]]) -> ScriptedModel:
    scripted = model(("sup__grow", {"name": "fresh"}), *between, ("sup__fresh", {}))
    cwd = tmp_path / "work"
    cwd.mkdir()
    async with embedded_runtime(tmp_path / "home", [cfg]) as runtime:
        async with runtime.open_session(cwd, scripted) as session:
            result = await session.run("grow a tool and use it")
            events = await runtime.log.store.read_events(session.id)
    assert result.status == "completed"
    finished = {e.tool: e.content for e in events if isinstance(e, ToolCallFinished)}
    assert finished["sup__fresh"] == "fresh was added"
    return scripted


async def test_a_tool_a_stdio_server_adds_during_a_run_is_in_the_next_model_request(tmp_path: Path) -> None:
    scripted = await run_growing(tmp_path, stdio_config())
    first, second, *_ = offered(scripted)
    assert "sup__grow" in first and "sup__fresh" not in first
    assert "sup__fresh" in second  # the very next request


async def test_a_tool_an_http_server_adds_during_a_run_reaches_the_model(tmp_path: Path) -> None:
    # Over HTTP the announcement comes on another stream than the result: it is applied when it lands, so the
    # request after one more step offers the tool at the latest (on a quiet machine, the very next one does).
    with http_server(tmp_path) as server:
        scripted = await run_growing(tmp_path, server.config(), ("sup__echo", {"text": "meanwhile"}))
    first, _, third, *_ = offered(scripted)
    assert "sup__fresh" not in first and "sup__fresh" in third


async def test_a_server_killed_while_the_session_idles_is_failed_then_ready_in_its_event_log(tmp_path: Path) -> None:
    scripted = model(("sup__pid", {}))
    cwd = tmp_path / "work"
    cwd.mkdir()
    async with embedded_runtime(tmp_path / "home", [stdio_config()]) as runtime:
        async with runtime.open_session(cwd, scripted) as session:
            await session.run("which process?")
            events = await runtime.log.store.read_events(session.id)
            [pid] = [e.content for e in events if isinstance(e, ToolCallFinished)]
            os.kill(int(pid), signal.SIGKILL)
            with anyio.fail_after(20):
                while True:
                    events = await runtime.log.store.read_events(session.id)
                    states = [e.state for e in events if isinstance(e, ServerStateChanged)]
                    if states.count("ready") == 2:
                        break
                    await anyio.sleep(0.05)
        events = await runtime.log.store.read_events(session.id)
    changes = [e for e in events if isinstance(e, ServerStateChanged)]
    assert [c.state for c in changes] == ["starting", "ready", "failed", "ready", "stopped"]
    assert changes[1].tools == 4 and changes[3].restarts == 1
    assert [e.server for e in events if isinstance(e, ServerFailed)] == ["sup"]  # older clients still see it
