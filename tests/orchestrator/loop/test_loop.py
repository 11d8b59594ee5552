"""The agent loop through a real Session: scripted model, real in-process MCP servers, real SQLite."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.server.mcpserver import MCPServer

from orchestrator.events import Event, ModelRetry, RunFinished, ToolCallFinished, ToolCallStarted
from orchestrator.hub.pool import Hub
from orchestrator.messages import ToolResultBlock
from orchestrator.models.base import Model, ModelRequest
from orchestrator.models.retry import RetryPolicy
from orchestrator.models.scripted import FunctionModel, ScriptedModel
from orchestrator.runtime.runtime import Session
from orchestrator.store.checkpoints import CheckpointStore
from orchestrator.store.eventlog import EventLog

pytestmark = pytest.mark.anyio

FAST_RETRY = RetryPolicy(max_attempts=3, base_delay_s=0.01, max_delay_s=0.02)


def rendezvous_server(executed: list[str]) -> MCPServer:
    """Two tools that can only both finish if they run at the same time."""
    server = MCPServer("meet", log_level="WARNING")
    arrived = {"a": anyio.Event(), "b": anyio.Event()}

    @server.tool()
    async def meet(me: str, other: str) -> str:
        """Arrive, then wait for the other side."""
        executed.append(me)
        arrived[me].set()
        with anyio.fail_after(5):
            await arrived[other].wait()
        return f"{me} met {other}"

    return server


@contextlib.asynccontextmanager
async def session_for(
    tmp_path: Path, model: Model, extra: dict[str, MCPServer] | None = None
) -> AsyncIterator[Session]:
    from servers import fs

    async with CheckpointStore(tmp_path / "loom.db") as store:
        log = EventLog(store)
        async with Hub({"fs": fs.build_server([tmp_path]), **(extra or {})}) as hub:
            yield Session("s_test", tmp_path, model, hub, log)


async def stored(session: Session) -> list[Event]:
    store = session.log.store
    return await store.read_events(session.id)


def call(name: str, arguments: dict[str, Any], id: str | None = None) -> dict[str, Any]:
    return {"name": name, "arguments": arguments, **({"id": id} if id else {})}


async def test_tool_results_are_fed_back_and_the_run_completes(tmp_path: Path) -> None:
    (tmp_path / "hello.txt").write_text("hello from disk\n")
    model = ScriptedModel.from_turns(
        [
            {"text": "Reading.", "tool_calls": [call("fs__read", {"path": "hello.txt"})]},
            {"text": "It says hello."},
        ]
    )
    async with session_for(tmp_path, model) as session:
        result = await session.run("read hello.txt")
        events = await stored(session)
    assert (result.status, result.final_text, result.steps) == ("completed", "It says hello.", 2)
    second = model.requests[1]
    results = [b for m in second.messages for b in m.content if isinstance(b, ToolResultBlock)]
    assert len(results) == 1 and "hello from disk" in results[0].content and not results[0].is_error
    assert [e.type for e in events] == [
        "run_started",
        "user_message",
        "assistant_message",
        "context_watermark",
        "tool_call_started",
        "tool_call_finished",
        "assistant_message",
        "context_watermark",
        "run_finished",
    ]
    assert [e.seq for e in events] == list(range(1, 10))


async def test_calls_of_one_turn_run_concurrently(tmp_path: Path) -> None:
    executed: list[str] = []
    model = ScriptedModel.from_turns(
        [
            {
                "tool_calls": [
                    call("meet__meet", {"me": "a", "other": "b"}),
                    call("meet__meet", {"me": "b", "other": "a"}),
                ]
            },
            {"text": "both met"},
        ]
    )
    async with session_for(tmp_path, model, {"meet": rendezvous_server(executed)}) as session:
        result = await session.run("meet")
        events = await stored(session)
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert result.status == "completed" and sorted(executed) == ["a", "b"]
    assert sorted(e.content for e in finished) == ["a met b", "b met a"] and not any(e.is_error for e in finished)
    # the results reach the model in the order it asked, whatever order they finished in
    # (requests share the live history, so index the message: user, assistant, tool results, ...)
    blocks = [b for b in model.requests[1].messages[2].content if isinstance(b, ToolResultBlock)]
    assert [b.content for b in blocks] == ["a met b", "b met a"]


async def test_bad_calls_become_error_results_and_nothing_runs(tmp_path: Path) -> None:
    model = ScriptedModel.from_turns(
        [
            {
                "tool_calls": [
                    call("fs__write", {"path": 42}),
                    call("fs__nope", {}),
                    call("fs__write", {"path": "../escape.txt", "content": "x"}),
                ]
            },
            {"text": "ok"},
        ]
    )
    async with session_for(tmp_path, model) as session:
        result = await session.run("misbehave")
        events = await stored(session)
    finished = {e.tool + str(i): e for i, e in enumerate(e for e in events if isinstance(e, ToolCallFinished))}
    kinds = sorted(e.failure or "" for e in finished.values())
    assert result.status == "completed"
    assert kinds == ["invalid_arguments", "tool_error", "unknown_tool"]
    assert not (tmp_path.parent / "escape.txt").exists()
    started = [e for e in events if isinstance(e, ToolCallStarted)]
    assert [e.arguments for e in started] == [{"path": "../escape.txt", "content": "x"}]  # only the valid call ran


async def test_max_steps_ends_the_run_as_failed(tmp_path: Path) -> None:
    model = FunctionModel(lambda request: {"tool_calls": [call("fs__list", {})]})
    async with session_for(tmp_path, model) as session:
        result = await session.run("loop forever", max_steps=3)
    assert (result.status, result.steps) == ("failed", 3)
    assert result.reason.startswith("max_steps")


async def test_transient_model_errors_are_retried_and_recorded(tmp_path: Path) -> None:
    model = ScriptedModel.from_turns([{"error": "transient:overloaded"}, {"text": "fine now"}])
    async with session_for(tmp_path, model) as session:
        result = await session.run("hi", retry=FAST_RETRY)
        events = await stored(session)
    retries = [e for e in events if isinstance(e, ModelRetry)]
    assert result.status == "completed" and result.final_text == "fine now"
    assert len(retries) == 1 and retries[0].error == "overloaded" and retries[0].attempt == 1


async def test_permanent_model_error_fails_the_run_with_the_providers_message(tmp_path: Path) -> None:
    model = ScriptedModel.from_turns([{"error": "permanent:401 authentication_error: invalid x-api-key"}])
    async with session_for(tmp_path, model) as session:
        result = await session.run("hi", retry=FAST_RETRY)
        events = await stored(session)
    assert result.status == "failed" and "invalid x-api-key" in result.reason
    assert not any(isinstance(e, ModelRetry) for e in events)
    assert isinstance(events[-1], RunFinished) and events[-1].status == "failed"


async def test_cancel_is_recorded_and_the_session_stays_usable(tmp_path: Path) -> None:
    model = ScriptedModel.from_turns([{"text": "thinking", "delay_s": 30}, {"text": "second run answer"}])
    async with session_for(tmp_path, model) as session:
        with anyio.move_on_after(0.3) as scope:
            await session.run("slow")
        assert scope.cancelled_caught
        again = await session.run("again")
        events = await stored(session)
    finished = [e for e in events if isinstance(e, RunFinished)]
    assert [e.status for e in finished] == ["cancelled", "completed"]
    assert again.final_text == "second run answer"


async def test_history_is_shared_by_reference_not_copied(tmp_path: Path) -> None:
    seen: list[int] = []

    def answer(request: ModelRequest) -> dict[str, Any]:
        seen.append(id(request.messages))
        return {"text": "hi"} if len(seen) > 2 else {"tool_calls": [call("fs__list", {})]}

    async with session_for(tmp_path, FunctionModel(answer)) as session:
        await session.run("go")
    assert len(set(seen)) == 1  # every request saw the same growing list
