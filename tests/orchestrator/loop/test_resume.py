"""Resuming interrupted runs in-process: real runtime, real stdio server, a scripted model.

Each run is really interrupted: the session host is closed while a tool call is in progress on the
test server (the run is recorded ``interrupted``, the call has started and never finished). The
server counts executions, so "not run again" is a fact about the server, not about the events.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from orchestrator.config import ServerConfig
from orchestrator.context.history import rebuild_history
from orchestrator.events import (
    ApprovalRequested,
    Event,
    RunFinished,
    RunResumed,
    ToolCallFinished,
    ToolCallStarted,
)
from orchestrator.face.server import build_face
from orchestrator.messages import TextBlock, ToolResultBlock
from orchestrator.models.base import Model, ModelRequest
from orchestrator.models.scripted import FunctionModel
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.host import HostError, SessionHost
from orchestrator.runtime.runtime import Runtime
from tests.mcp_calls import call

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[3]
SERVER = str(Path(__file__).parents[1] / "resume_test_server.py")


@dataclass
class World:
    """A Loom home, a working directory, the counting server and one model for every (re)opened session."""

    tmp: Path
    calls: list[dict[str, Any]]
    requests: list[ModelRequest] = field(default_factory=list[ModelRequest])

    def __post_init__(self) -> None:
        (self.tmp / "work").mkdir()
        self.model = FunctionModel(self.answer, name="resume-test")

    @property
    def home(self) -> Path:
        return self.tmp / "home"

    @property
    def record(self) -> Path:
        return self.tmp / "record.txt"

    def answer(self, request: ModelRequest) -> dict[str, Any]:
        """Ask for the calls in answer to the user's message; answer in text once results come back."""
        self.requests.append(dataclasses.replace(request, messages=list(request.messages)))  # the live list grows
        if any(isinstance(b, ToolResultBlock) for b in request.messages[-1].content):
            return {"text": "all done"}
        return {"text": "working", "tool_calls": self.calls}

    def server(self) -> ServerConfig:
        return ServerConfig(
            name="rs",
            transport="stdio",
            command=sys.executable,
            args=(SERVER,),
            env={"PYTHONPATH": str(REPO), "RESUME_RECORD_FILE": str(self.record)},
            startup_timeout_s=20,
        )

    def resolver(self) -> Callable[[str, Path], Model]:
        return lambda spec, cwd: self.model

    def has_run(self, tag: str) -> bool:
        return self.count(tag) > 0

    def count(self, tag: str) -> int:
        lines = self.record.read_text().splitlines() if self.record.exists() else []
        return lines.count(f"run {tag}")

    @contextlib.asynccontextmanager
    async def host(self) -> AsyncIterator[SessionHost]:
        async with embedded_runtime(self.home, [self.server()]) as runtime, SessionHost(runtime, self.resolver()) as h:
            yield h


async def stored(runtime: Runtime, session_id: str, found: Callable[[list[Event]], bool]) -> list[Event]:
    """Wait (bounded) until the session's stored events satisfy ``found``."""
    with anyio.fail_after(20):
        while True:
            events = await runtime.log.store.read_events(session_id)
            if found(events):
                return events
            await anyio.sleep(0.05)


async def until(condition: Callable[[], bool]) -> None:
    """Wait (bounded) until ``condition()`` holds."""
    with anyio.fail_after(10):
        while True:
            if condition():
                return
            await anyio.sleep(0.02)


def started(tag: str) -> Callable[[list[Event]], bool]:
    return lambda events: any(isinstance(e, ToolCallStarted) and e.arguments.get("tag") == tag for e in events)


def finished(tag: str) -> Callable[[list[Event]], bool]:
    return lambda events: any(
        isinstance(e, ToolCallFinished) and f" {tag} " in f" {e.content} " and not e.is_error for e in events
    )


async def interrupt(world: World, *, held: list[str], done: list[str], mode: str = "bypass") -> tuple[str, str]:
    """Start a run and close the host once ``done`` calls finished and ``held`` calls are in progress."""
    async with world.host() as host:
        session = await host.create_session(world.tmp / "work", world.model, mode)
        handle = await host.start_run(session.id, "go", 10)
        for tag in done:
            await stored(host.runtime, session.id, finished(tag))
        for tag in held:
            await stored(host.runtime, session.id, started(tag))
            await until(functools.partial(world.has_run, tag))  # the server has it
    return session.id, handle.run_id


def note_of(request: ModelRequest) -> str:
    return "".join(b.text for b in request.messages[-1].content if isinstance(b, TextBlock))


async def test_finished_calls_are_reused_and_unfinished_read_only_or_idempotent_calls_run_again_once(
    tmp_path: Path,
) -> None:
    world = World(
        tmp_path,
        [
            {"name": "rs__charge", "arguments": {"tag": "paid"}},
            {"name": "rs__lookup", "arguments": {"tag": "read", "hold": True}},
            {"name": "rs__put", "arguments": {"tag": "stored", "hold": True}},
        ],
    )
    session_id, run_id = await interrupt(world, held=["read", "stored"], done=["paid"])
    async with world.host() as host:
        assert host.interrupted == []  # a clean shutdown recorded it interrupted already
        assert (await host.view(run_id)).status == "interrupted"
        handle = await host.resume_run(run_id)
        assert handle.run_id == run_id
        with anyio.fail_after(20):
            await handle.done.wait()
        view = await host.view(run_id)
        events = await host.runtime.log.store.read_events(session_id, run_id=run_id)
    assert (view.status, view.final_text) == ("completed", "all done")
    assert (world.count("paid"), world.count("read"), world.count("stored")) == (1, 2, 2)
    resumed = next(e for e in events if isinstance(e, RunResumed))
    uses = {u.input["tag"]: u.id for u in world.requests[-1].messages[-2].tool_uses}
    assert resumed.after_step == 1
    assert (resumed.reused, resumed.rerun, resumed.review) == ([uses["paid"]], [uses["read"], uses["stored"]], [])
    final = events[-1]
    assert isinstance(final, RunFinished) and (final.status, final.steps) == ("completed", 2)
    # the model's next request: every result once, in order, and the note saying what happened
    last = world.requests[-1].messages[-1]
    results = [b for b in last.content if isinstance(b, ToolResultBlock)]
    assert [r.tool_use_id for r in results] == [uses["paid"], uses["read"], uses["stored"]]
    assert [r.content for r in results] == ["charged paid ok", "looked up read ok", "put stored ok"]
    note = note_of(world.requests[-1])
    assert "interrupted after step 1" in note and "reused, not run again: rs__charge" in note
    assert "run again (read-only or idempotent): rs__lookup" in note
    # a later rebuild of the session shows the model exactly what it saw
    async with embedded_runtime(world.home) as runtime:
        rebuilt = rebuild_history(await runtime.log.store.read_events(session_id))
    assert rebuilt[: len(world.requests[-1].messages)] == world.requests[-1].messages


async def test_an_unfinished_side_effecting_call_needs_review_and_approve_runs_it_again(tmp_path: Path) -> None:
    world = World(tmp_path, [{"name": "rs__charge", "arguments": {"tag": "card", "hold": True}}])
    session_id, run_id = await interrupt(world, held=["card"], done=[])
    async with world.host() as host, Client(build_face(host)) as client:
        run = await call(client, "resume_run", run_id=run_id, wait_s=10)
        assert (run["status"], len(run["pending_approvals"])) == ("needs_review", 1)
        session = await call(client, "get_session", session_id=session_id)
        assert session["state"] == "active"
        [approval] = (await call(client, "list_approvals"))["approvals"]
        assert (approval["kind"], approval["tool"]) == ("review", "rs__charge")
        assert "may have run already" in approval["reason"]
        assert world.count("card") == 1  # nothing ran while waiting
        await call(client, "decide_approval", approval_id=approval["approval_id"], decision="approve_once")
        run = await call(client, "get_run", run_id=run_id, wait_s=20)
        session = await call(client, "get_session", session_id=session_id)
    assert (run["status"], run["final_text"]) == ("completed", "all done")
    assert session["state"] == "idle"
    assert world.count("card") == 2
    assert "may already have taken effect: rs__charge" in note_of(world.requests[-1])


async def test_deny_skips_the_unfinished_call_and_the_model_is_told_why(tmp_path: Path) -> None:
    world = World(tmp_path, [{"name": "rs__charge", "arguments": {"tag": "card", "hold": True}}])
    session_id, run_id = await interrupt(world, held=["card"], done=[])
    async with world.host() as host:
        await host.resume_run(run_id)
        await until(lambda: bool(host.pending(run_id=run_id)))
        assert (await host.view(run_id)).status == "needs_review"
        [pending] = host.pending(run_id=run_id)
        await host.decide(pending.approval_id, "deny", "the card was already charged", "test")
        with anyio.fail_after(20):
            await host.runs[run_id].done.wait()
        view = await host.view(run_id)
    assert view.status == "completed"
    assert world.count("card") == 1
    [result] = [b for b in world.requests[-1].messages[-1].content if isinstance(b, ToolResultBlock)]
    assert result.is_error and "not run again" in result.content and "the card was already charged" in result.content


async def test_cancelling_a_run_that_waits_for_review_stops_it(tmp_path: Path) -> None:
    world = World(tmp_path, [{"name": "rs__charge", "arguments": {"tag": "card", "hold": True}}])
    session_id, run_id = await interrupt(world, held=["card"], done=[])
    async with world.host() as host:
        await host.resume_run(run_id)
        await until(lambda: bool(host.pending(run_id=run_id)))
        view = await host.cancel(run_id)
        record = await host.runtime.log.store.get_run(run_id)
        with pytest.raises(HostError, match="cancelled"):
            await host.resume_run(run_id)
    assert view.status == "cancelled" and record is not None and record.status == "cancelled"
    assert world.count("card") == 1
    assert len(world.requests) == 1  # the model was not called again


async def test_a_headless_resume_ends_needs_review_and_runs_nothing_again(tmp_path: Path) -> None:
    world = World(
        tmp_path,
        [
            {"name": "rs__charge", "arguments": {"tag": "card", "hold": True}},
            {"name": "rs__lookup", "arguments": {"tag": "read", "hold": True}},
        ],
    )
    session_id, run_id = await interrupt(world, held=["card", "read"], done=[])
    async with embedded_runtime(world.home, [world.server()]) as runtime:
        async with runtime.open_session(
            world.tmp / "work", world.model, session_id=session_id, headless=True
        ) as session:
            result = await session.resume(run_id)
            after = session.history[-1]
        record = await runtime.log.store.get_run(run_id)
    assert result.status == "needs_review"
    assert "rs__charge" in result.reason and "nothing was run again" in result.reason
    assert record is not None and (record.status, record.reason) == ("needs_review", result.reason)
    assert (world.count("card"), world.count("read"), len(world.requests)) == (1, 1, 1)
    # the session's history stays valid for a next message: each call has a result (effect unknown)
    assert after.role == "user" and len(after.content) == 2
    assert all(isinstance(b, ToolResultBlock) and "effect is unknown" in b.content for b in after.content)
    # a needs_review run can be resumed again where someone can answer
    async with world.host() as host:
        await host.resume_run(run_id)
        await until(lambda: bool(host.pending(run_id=run_id)))
        [pending] = host.pending(run_id=run_id)
        await host.decide(pending.approval_id, "approve_once", "", "test")
        with anyio.fail_after(20):
            await host.runs[run_id].done.wait()
        assert (await host.view(run_id)).status == "completed"
    assert (world.count("card"), world.count("read")) == (2, 2)


async def test_a_call_that_was_waiting_for_approval_is_asked_about_again(tmp_path: Path) -> None:
    world = World(tmp_path, [{"name": "rs__charge", "arguments": {"tag": "card"}}])
    async with world.host() as host:
        session = await host.create_session(world.tmp / "work", world.model, "ask")
        handle = await host.start_run(session.id, "go", 10)
        await until(lambda: bool(host.pending(run_id=handle.run_id)))
    async with world.host() as host:
        await host.resume_run(handle.run_id)
        await until(lambda: bool(host.pending(run_id=handle.run_id)))
        assert (await host.view(handle.run_id)).status == "awaiting_approval"
        [pending] = host.pending(run_id=handle.run_id)
        assert pending.kind == "policy"
        await host.decide(pending.approval_id, "approve_once", "", "test")
        with anyio.fail_after(20):
            await host.runs[handle.run_id].done.wait()
        events = await host.runtime.log.store.read_events(session.id, run_id=handle.run_id)
    assert world.count("card") == 1
    asked = [e for e in events if isinstance(e, ApprovalRequested)]
    assert len(asked) == 2
    resumed = next(e for e in events if isinstance(e, RunResumed))
    assert resumed.unstarted == [asked[0].call_id]


async def test_only_interrupted_runs_of_the_latest_turn_can_be_resumed(tmp_path: Path) -> None:
    world = World(tmp_path, [{"name": "rs__lookup", "arguments": {"tag": "read", "hold": True}}])
    session_id, run_id = await interrupt(world, held=["read"], done=[])
    world.calls = []
    async with world.host() as host:
        with pytest.raises(HostError, match="no run"):
            await host.resume_run("r_missing")
        later = await host.start_run(session_id, "something else", 5)
        with anyio.fail_after(20):
            await later.done.wait()
        with pytest.raises(HostError, match="completed"):
            await host.resume_run(later.run_id)
        with pytest.raises(HostError, match="latest run"):
            await host.resume_run(run_id)
    # the new turn saw the interrupted call's result as unknown, as before resumes existed
    assert "effect is unknown" in str(world.requests[-1].messages)


async def test_a_message_sent_while_the_session_is_busy_is_queued_until_the_run_ahead_ends(tmp_path: Path) -> None:
    world = World(tmp_path, [{"name": "rs__lookup", "arguments": {"tag": "slow", "hold": True}}])
    async with world.host() as host, Client(build_face(host)) as client:
        session = await host.create_session(world.tmp / "work", world.model, "bypass")
        first = await host.start_run(session.id, "first", 5)
        await until(functools.partial(world.has_run, "slow"))
        world.calls = []
        second = await call(client, "send_message", session_id=session.id, text="second")
        assert second["status"] == "queued"
        assert (await call(client, "get_session", session_id=session.id))["state"] == "active"
        stored = await host.runtime.log.store.get_run(second["run_id"])
        assert stored is not None and stored.status == "queued"  # recorded at once: a crash loses no message
        assert (await call(client, "cancel_run", run_id=first.run_id))["status"] == "cancelled"
        done = await call(client, "get_run", run_id=second["run_id"], wait_s=20)
        idle = await call(client, "get_session", session_id=session.id)
    assert (done["status"], done["final_text"]) == ("completed", "working")
    assert idle["state"] == "idle"
