"""The supervisor, seen from a hub: real servers (stdio subprocesses, uvicorn subprocesses), killed and wedged.

What a user notices: a server that dies while nobody calls it is reported ``failed`` and comes back ``ready`` with no
call made; a call to a wedged server times out, the server is restarted and the next call works; a server that adds
a tool has it offered as soon as its announcing call returns, in either protocol era.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest

from orchestrator.hub.pool import Hub
from tests.orchestrator.hub.supervised import States, http_server, stdio_config

pytestmark = pytest.mark.anyio

BACKOFF = (0.2, 0.5, 1.0)


class Legacy:
    """Client hooks that pin the handshake era (ping exists, list changes come as plain notifications)."""

    def client_options(self, server: str) -> dict[str, Any]:
        return {"mode": "legacy"}


@pytest.mark.parametrize("era", ["2026-07-28", "legacy"])
async def test_a_stdio_server_killed_while_idle_is_failed_then_ready_without_any_call(tmp_path: Path, era: str) -> None:
    states = States()
    hooks = Legacy() if era == "legacy" else None
    async with Hub(
        {}, [stdio_config()], log_dir=tmp_path, on_state=states, client_hooks=hooks, restart_backoff_s=BACKOFF
    ) as hub:
        assert states.states == ["starting", "ready"]
        first = await hub.call("sup__pid", {})
        os.kill(int(first.content), signal.SIGKILL)
        failed, why = await states.wait_for("failed", after=2)
        ready, _ = await states.wait_for("ready", after=3)
        # no call was made in between: the supervisor noticed and restarted it alone
        assert ready.restarts == 1 and ready.tools == 4
        assert "answer" in why or "connection" in why.lower()
        again = await hub.call("sup__pid", {})
    [health] = hub.statuses()
    assert not again.is_error and again.content != first.content
    assert (health.state, health.transport, health.restarts) == ("stopped", "stdio", 1)
    assert states.states[:4] == ["starting", "ready", "failed", "ready"]


async def test_an_http_server_killed_while_idle_is_failed_then_ready_once_it_is_back(tmp_path: Path) -> None:
    states = States()
    with http_server(tmp_path) as server:
        async with Hub({}, [server.config()], on_state=states, restart_backoff_s=BACKOFF) as hub:
            assert states.states == ["starting", "ready"]
            server.kill()
            _, why = await states.wait_for("failed", after=2)
            [down] = hub.statuses()
            assert down.state == "failed" and down.last_error == why
            server.start()  # the same port, a new process: the supervisor reconnects by itself
            ready, _ = await states.wait_for("ready", after=3)
            answer = await hub.call("sup__pid", {})
    assert ready.restarts >= 1
    assert int(answer.content) == server.pids[-1] != server.pids[0]


async def test_a_call_to_a_wedged_stdio_server_times_out_the_server_is_restarted_and_the_next_call_works(
    tmp_path: Path,
) -> None:
    states = States()
    cfg = stdio_config(call_timeout_s=1.0, env={"TEST_WEDGE_S": "3600"})
    async with Hub({}, [cfg], log_dir=tmp_path, on_state=states, restart_backoff_s=BACKOFF) as hub:
        before = await hub.call("sup__pid", {})
        with anyio.fail_after(10):  # the call's 1 s, then a 1 s health check that goes unanswered
            wedged = await hub.call("sup__wedge", {})
        assert wedged.failure == "timed_out"
        _, why = await states.wait_for("failed", after=2)
        after = await hub.call("sup__pid", {})  # waits for the restart that is due, then reaches the new process
    assert "did not answer a health check" in why
    assert not after.is_error and after.content != before.content


async def test_a_call_to_a_wedged_http_server_times_out_and_the_next_call_works_once_it_answers(
    tmp_path: Path,
) -> None:
    states = States()
    with http_server(tmp_path, TEST_WEDGE_S="4") as server:
        cfg = server.config(call_timeout_s=1.0)
        async with Hub({}, [cfg], on_state=states, restart_backoff_s=BACKOFF) as hub:
            wedged = await hub.call("sup__wedge", {})
            assert wedged.failure == "timed_out"
            await states.wait_for("failed", after=2)
            await states.wait_for("ready", after=3)  # reconnected once the server's loop runs again
            after = await hub.call("sup__echo", {"text": "still here"})
    assert after.content == "still here"


@pytest.mark.parametrize("era", ["2026-07-28", "legacy"])
async def test_a_tool_a_stdio_server_adds_is_offered_when_its_announcing_call_returns(tmp_path: Path, era: str) -> None:
    states = States()
    hooks = Legacy() if era == "legacy" else None
    async with Hub({}, [stdio_config()], log_dir=tmp_path, on_state=states, client_hooks=hooks) as hub:
        specs = hub.tool_specs
        assert "sup__fresh" not in [t.name for t in specs]
        grown = await hub.call("sup__grow", {"name": "fresh"})
        assert grown.content == "added fresh"
        assert "sup__fresh" in [t.name for t in hub.tool_specs]  # no waiting: applied before the result returned
        used = await hub.call("sup__fresh", {})
    assert used.content == "fresh was added"
    assert specs is not hub.tool_specs and len(hub.tool_specs) == len(specs) + 1
    changed = [(h.tools, why) for h, why in states.seen if "changed" in why]
    assert changed == [(5, "its tool list changed; 5 tools")]


@pytest.mark.parametrize("era", ["2026-07-28", "legacy"])
async def test_a_tool_an_http_server_adds_is_offered_once_its_announcement_arrives(tmp_path: Path, era: str) -> None:
    # Over HTTP the announcement travels on another stream than the call's result (the listen stream, or the
    # session's GET stream), so it may land just after the result: bounded wait, no call in between.
    hooks = Legacy() if era == "legacy" else None
    with http_server(tmp_path) as server:
        async with Hub({}, [server.config()], client_hooks=hooks) as hub:
            await hub.call("sup__grow", {"name": "fresh"})
            with anyio.fail_after(5):
                while hub.tool("sup__fresh") is None:  # noqa: ASYNC110 - the hub has no event for this, by design
                    await anyio.sleep(0.01)
            used = await hub.call("sup__fresh", {})
    assert used.content == "fresh was added"


async def test_health_checks_measure_latency_and_leave_a_busy_server_alone(tmp_path: Path) -> None:
    async with Hub({}, [stdio_config()], log_dir=tmp_path) as hub:
        await anyio.sleep(1.0)  # a few health checks (every 0.3 s)
        [health] = hub.statuses()
    assert health.state == "ready" and health.latency_ms is not None and 0 < health.latency_ms < 1000
