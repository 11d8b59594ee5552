"""Loom as an MCP client: what it tells a server it is, and what it answers when the server asks something of it.

The server is a real stdio subprocess (asking_test_server.py). The SDK's ``Client`` is driven in both eras it lets
a client choose (``mode="legacy"`` and the default), and a session's hub reaches the server as a session would.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from orchestrator.config import ServerConfig
from orchestrator.events import Event, ServerLog, ToolCallFinished, ToolProgress
from orchestrator.hub.client_caps import STREAM_LOGS_PER_MINUTE, SessionClientHooks
from orchestrator.models.scripted import ScriptedModel
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.questions import QuestionDesk
from orchestrator.runtime.runtime import Runtime
from orchestrator.store.checkpoints import CheckpointStore
from orchestrator.store.eventlog import EventLog
from servers._version import loom_version

pytestmark = pytest.mark.anyio

SERVER = str(Path(__file__).with_name("asking_test_server.py"))
MODES = ["auto", "legacy"]


@contextlib.asynccontextmanager
async def hooked_client(tmp_path: Path, mode: str) -> AsyncIterator[tuple[Client, SessionClientHooks, EventLog]]:
    async with CheckpointStore(tmp_path / "loom.db") as store:
        log = EventLog(store)
        hooks = SessionClientHooks(log, QuestionDesk(log), cwd=tmp_path, log_dir=tmp_path / "logs")
        params = StdioServerParameters(command=sys.executable, args=[SERVER])
        async with Client(params, mode=mode, **hooks.client_options("asking")) as client:
            yield client, hooks, log


def text_of(result: Any) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content)


@pytest.mark.parametrize("mode", MODES)
async def test_loom_names_itself_declares_what_it_can_and_gives_its_directory_as_root(
    tmp_path: Path, mode: str
) -> None:
    async with hooked_client(tmp_path, mode) as (client, _, _):
        who = (await client.call_tool("whoami", {})).structured_content
        roots = text_of(await client.call_tool("roots", {}))
    assert who is not None
    assert (who["name"], who["version"]) == ("loom", loom_version())
    assert who["protocol"] == ("2026-07-28" if mode == "auto" else "2025-11-25")
    assert who["can"] == ["elicitation", "roots", "sampling"]
    assert roots == Path(await anyio.Path(tmp_path).resolve()).as_uri()


@pytest.mark.parametrize("mode", MODES)
async def test_a_server_asks_before_the_session_is_bound_and_is_declined(tmp_path: Path, mode: str) -> None:
    async with hooked_client(tmp_path, mode) as (client, _, _):
        answer = text_of(await client.call_tool("ask", {"topic": "pears"}))
    assert answer == "not answered: decline"


@pytest.mark.parametrize("mode", MODES)
async def test_every_log_message_goes_to_the_file_and_a_flood_of_warnings_is_capped_on_the_stream(
    tmp_path: Path, mode: str
) -> None:
    async with hooked_client(tmp_path, mode) as (client, hooks, log):

        class Bound:  # the session's id is all logging needs of it
            id = "s_test"

        hooks.session = Bound()  # type: ignore[assignment]
        await client.call_tool("slow", {"steps": 2})
        await client.call_tool("shout", {"times": STREAM_LOGS_PER_MINUTE + 5})
        for _ in range(200):  # the SDK delivers each notification in a task of its own: let them all land
            events = await log.store.read_events("s_test")
            if len(events) >= STREAM_LOGS_PER_MINUTE:
                break
            await anyio.sleep(0.05)
        await anyio.sleep(0.2)  # and any past the cap would have landed too
        events = await log.store.read_events("s_test")
    written = (tmp_path / "logs" / "asking.log").read_text()
    assert "[info]: did step 1" in written and "[warning]: the disk is nearly full" in written
    assert f"warning {STREAM_LOGS_PER_MINUTE + 4}" in written
    logged = [e for e in events if isinstance(e, ServerLog)]
    assert len(logged) == STREAM_LOGS_PER_MINUTE
    assert logged[0].message == "the disk is nearly full" and logged[0].level == "warning"
    assert all(e.level != "info" for e in logged)  # only warning and above reach the stream


SLOW: list[dict[str, Any]] = [
    {"text": "working", "tool_calls": [{"id": "w", "name": "asking__slow", "arguments": {"steps": 3}}]},
    {"text": "done: {{result:w}}"},
]


@pytest.mark.parametrize("era", ["modern", "legacy"])
async def test_a_sessions_tool_call_carries_a_progress_token_and_a_follower_sees_the_progress(
    tmp_path: Path, era: str
) -> None:
    env = {"ASKING_LEGACY_ONLY": "1"} if era == "legacy" else {}
    config = ServerConfig(name="asking", transport="stdio", command=sys.executable, args=(SERVER,), env=env)
    seen: list[Event] = []
    async with embedded_runtime(tmp_path / "home", [config]) as runtime:
        async with runtime.log.subscribe() as follower, anyio.create_task_group() as tg:

            async def follow() -> None:
                async for event in follower:
                    seen.append(event)

            tg.start_soon(follow)
            result = await run_once(runtime, tmp_path, ScriptedModel.from_turns(SLOW))
            await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
        stored = await runtime.log.store.read_events(result[0])
    progress = [e for e in seen if isinstance(e, ToolProgress)]
    assert [(p.progress, p.total, p.message) for p in progress] == [
        (float(i), 3.0, f"step {i} of 3") for i in (1, 2, 3)
    ]
    (finished,) = [e for e in stored if isinstance(e, ToolCallFinished)]
    assert {(p.run_id, p.call_id, p.tool) for p in progress} == {(finished.run_id, finished.call_id, "asking__slow")}
    assert not any(isinstance(e, ToolProgress) for e in stored)  # live only
    assert result[1] == "done: done 3"
    log_file = tmp_path / "home" / "logs" / "asking.log"
    assert "did step 3" in log_file.read_text()
    assert [e.message for e in stored if isinstance(e, ServerLog)] == ["the disk is nearly full"]


async def run_once(runtime: Runtime, cwd: Path, model: ScriptedModel) -> tuple[str, str]:
    async with runtime.open_session(cwd, model, mode="bypass") as session:
        result = await session.run("go")
        return session.id, result.final_text
