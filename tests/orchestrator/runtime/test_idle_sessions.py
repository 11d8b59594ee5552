"""The host closes idle sessions (their servers and memory) and brings them back from the store when used again.

Real parts: the SQLite store, scripted models from script files (what the daemon resolves), and an external
stdio MCP server per session, a real subprocess, so that closing a session is seen to end its connections.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from orchestrator.config import ConfigError, ServerConfig, SessionLimits, parse_config
from orchestrator.context.history import rebuild_history
from orchestrator.events import ApprovalRequested
from orchestrator.models import resolve_model
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.host import SessionHost
from orchestrator.runtime.idle import OpenSession, to_close

pytestmark = pytest.mark.anyio

SERVER_SCRIPT = str(Path(__file__).parents[1] / "stdio_test_server.py")
EXT = ServerConfig(name="ext", transport="stdio", command=sys.executable, args=(SERVER_SCRIPT,))


def script(tmp_path: Path, name: str, turns: list[dict[str, Any]]) -> str:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"turns": turns}))
    return f"scripted:{path}"


def ext_servers() -> int:
    """How many of this process's children are the test's stdio server."""
    found = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        if ppid == os.getpid() and SERVER_SCRIPT.encode() in cmdline:
            found += 1
    return found


async def closed(host: SessionHost, session_id: str) -> None:
    """Wait, bounded, until the host has closed the session by itself."""
    entry = host.held(session_id)
    if entry is not None:  # else closed already
        with anyio.fail_after(10):
            await entry.closed.wait()
    assert session_id not in host.sessions


async def test_past_max_open_the_least_recently_used_idle_sessions_close_with_their_servers(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    spec = script(tmp_path, "hello", [{"text": "hello"}])
    limits = SessionLimits(idle_close_s=3600, max_open=2)
    async with embedded_runtime(tmp_path / "home", [EXT]) as runtime:
        async with SessionHost(runtime, limits=limits, grace_s=0) as host:
            ids: list[str] = []
            first_run = ""
            for i in range(6):
                session = await host.create_session(work, resolve_model(spec, base_dir=work), "bypass")
                ids.append(session.id)
                handle = await host.start_run(session.id, f"hi {i}", 5)
                with anyio.fail_after(20):
                    await handle.done.wait()
                assert handle.status == "completed"
                first_run = first_run or handle.run_id
                await host.close_idle()
                assert len(host.sessions) <= 2 and ext_servers() <= 2
            assert set(host.sessions) == set(ids[-2:])
            assert first_run not in host.runs and (await host.view(first_run)).status == "completed"  # from the store

            # The first session, closed long ago, continues where it was.
            first = await host.session(ids[0])
            assert [m.text for m in first.history] == ["hi 0", "hello"]
            handle = await host.start_run(ids[0], "and again", 5)
            with anyio.fail_after(20):
                await handle.done.wait()
            assert [m.text for m in first.history] == ["hi 0", "hello", "and again", "hello"]
            assert first.history == rebuild_history(await runtime.log.store.read_context_events(ids[0]))
            await host.close_idle()
            assert ids[0] in host.sessions and len(host.sessions) == 2 and ext_servers() == 2
    assert ext_servers() == 0


async def test_idle_sessions_close_by_themselves_but_never_with_a_run_or_an_approval_pending(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    quick = script(tmp_path, "quick", [{"text": "done"}])
    slow = script(tmp_path, "slow", [{"text": "thinking", "delay_s": 60}])
    asking = script(
        tmp_path,
        "asking",
        [
            {"text": "writing", "tool_calls": [{"name": "fs__write", "arguments": {"path": "a.txt", "content": "x"}}]},
            {"text": "wrote it"},
        ],
    )
    limits = SessionLimits(idle_close_s=0.0, max_open=100)
    async with embedded_runtime(tmp_path / "home") as runtime, SessionHost(runtime, limits=limits, grace_s=0) as host:
        waiting = await host.create_session(work, resolve_model(asking, base_dir=work), "ask")
        async with runtime.log.subscribe() as events:
            asked = await host.start_run(waiting.id, "write a.txt", 5)
            with anyio.fail_after(20):
                async for event in events:
                    if isinstance(event, ApprovalRequested):
                        break
        thinking = await host.create_session(work, resolve_model(slow, base_dir=work), "bypass")
        pondering = await host.start_run(thinking.id, "think hard", 5)
        idle = await host.create_session(work, resolve_model(quick, base_dir=work), "bypass")
        handle = await host.start_run(idle.id, "say done", 5)
        with anyio.fail_after(20):
            await handle.done.wait()

        await closed(host, idle.id)  # by the host, on its own
        assert waiting.id in host.sessions and thinking.id in host.sessions
        assert (await host.view(asked.run_id)).status == "awaiting_approval"

        pending = host.pending(session_id=waiting.id)[0]
        await host.decide(pending.approval_id, "approve_once", "", "test")
        with anyio.fail_after(20):
            await asked.done.wait()
        assert asked.status == "completed" and (work / "a.txt").read_text() == "x"
        await closed(host, waiting.id)
        assert thinking.id in host.sessions

        await host.cancel(pondering.run_id)
        await closed(host, thinking.id)
        assert not host.sessions


async def test_a_closed_headless_session_is_reopened_headless(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    spec = script(tmp_path, "hello", [{"text": "hello"}])
    limits = SessionLimits(idle_close_s=0.0, max_open=100)
    async with embedded_runtime(tmp_path / "home") as runtime, SessionHost(runtime, limits=limits, grace_s=0) as host:
        session = await host.create_session(work, resolve_model(spec, base_dir=work), "ask", headless=True)
        await closed(host, session.id)
        again = await host.session(session.id)
        assert again is not session and again.approvals.headless and again.approvals.mode == "ask"


def test_lru_closes_the_oldest_idle_sessions_first_and_never_a_busy_or_just_used_one() -> None:
    entries = [OpenSession(f"s_{i}", used=float(i)) for i in range(6)]
    for entry in entries:
        entry.session = object()  # type: ignore[assignment]  # only its presence matters here
    limits = SessionLimits(idle_close_s=100, max_open=3)
    chosen = to_close(entries, 10.0, limits, lambda e: e.session_id == "s_0", grace_s=5)
    # s_0 is busy, s_6.. do not exist, s_5 was used within the grace: the oldest idle ones go first.
    assert [e.session_id for e in chosen] == ["s_1", "s_2", "s_3"]
    assert [e.session_id for e in to_close(entries, 200.0, limits, lambda e: False)] == [e.session_id for e in entries]


def test_the_config_sets_the_limits_and_names_what_is_wrong(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    found = parse_config(json.dumps({"sessions": {"idleCloseAfter": 30, "maxOpen": 8}}), path)
    assert found.sessions == SessionLimits(idle_close_s=30.0, max_open=8)
    assert parse_config("{}", path).sessions is None
    for bad, says in [
        ({"maxOpen": 0}, "maxOpen must be a whole number"),
        ({"idleCloseAfter": -1}, "idleCloseAfter must be a positive number"),
        ({"idle": 5}, "unknown key 'idle'"),
    ]:
        with pytest.raises(ConfigError) as raised:
            parse_config(json.dumps({"sessions": bad}), path)
        assert says in str(raised.value)
