"""A run interrupted after the advisor's verdict resumes from the stored verdict: the advisor is never asked twice.

The interruption is a real one as far as the store can tell: the run is cancelled mid-step (as a killed daemon stops
it), then a fresh context with fresh models resumes it from the stored events, as a restarted daemon would.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

from orchestrator.context.history import rebuild_history
from orchestrator.events import AdvisorReviewed, Event, RunResumed, ToolCallStarted
from orchestrator.hub.pool import Hub
from orchestrator.loop.advisor import Advisor
from orchestrator.loop.resume import find_resume_point, resume_loop
from orchestrator.messages import TextBlock, ToolResultBlock
from orchestrator.models.scripted import ScriptedModel
from orchestrator.store.checkpoints import CheckpointStore
from orchestrator.store.eventlog import EventLog
from tests.orchestrator.loop.test_advisor import World, verdict

pytestmark = pytest.mark.anyio


def stamping_server(calls: list[str]) -> MCPServer:
    """``stamp``: idempotent; its first call hangs (the process "dies" during it), later ones answer."""
    server = MCPServer("slow", log_level="WARNING")

    @server.tool(annotations=ToolAnnotations(idempotent_hint=True))
    async def stamp(name: str) -> str:
        """Stamp a name."""
        calls.append(name)
        if len(calls) == 1:
            await anyio.sleep_forever()
        return f"stamped {name}"

    return server


async def interrupt_when(w: World, agent: ScriptedModel, advisor: Advisor, seen: Callable[[list[Event]], bool]) -> None:
    """Run until the stored events satisfy ``seen``, then stop the run as a crash would (nothing more is stored)."""
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(w.run, agent, advisor)
            with anyio.fail_after(10):
                while True:  # polling the store: what is stored is what a restart would find
                    if seen(await w.events()):
                        break
                    await anyio.sleep(0.01)
            scope.cancel()


async def resume(w: World, agent: ScriptedModel, advisor: Advisor) -> tuple[str, list[Event], Any]:
    ctx = w.context(agent, advisor, mode="bypass", headless=True)
    point = find_resume_point(await w.events(), "r")
    result = await resume_loop(ctx, point, headless=True)
    if ctx.unstored:
        await w.log.append(*ctx.unstored)
    return result.status, await w.events(), ctx.history


async def test_a_resume_after_the_verdict_reuses_it_and_the_warnings_reach_the_model_again(tmp_path: Path) -> None:
    calls: list[str] = []
    agent = ScriptedModel.from_turns(
        [{"tool_calls": [{"name": "slow__stamp", "arguments": {"name": "release"}}]}, {"text": "never reached"}]
    )
    first = ScriptedModel.from_turns([verdict("warn", "stamping the release is public")])
    async with CheckpointStore(tmp_path / "loom.db") as store:
        log = EventLog(store)
        async with Hub({"slow": stamping_server(calls)}) as hub:
            w = World(tmp_path, log, hub)
            await interrupt_when(
                w,
                agent,
                Advisor(first, "full", cwd=str(tmp_path)),
                lambda es: any(isinstance(e, ToolCallStarted) for e in es),
            )
            # Restarted: new models (a second review would reject, which would show), the same store.
            agent2 = ScriptedModel.from_turns([{"text": "Stamped after the restart."}])
            second = ScriptedModel.from_turns([verdict("reject", "asked twice")])
            status, events, history = await resume(w, agent2, Advisor(second, "full", cwd=str(tmp_path)))
    assert status == "completed" and calls == ["release", "release"]  # idempotent: run again once
    assert second.requests == [] and [r.verdict for r in events if isinstance(r, AdvisorReviewed)] == ["warn"]
    resumed_turn = agent2.requests[0].messages[2]
    blocks = resumed_turn.content
    assert isinstance(blocks[0], ToolResultBlock) and blocks[0].content == "stamped release"
    texts = [b.text for b in blocks if isinstance(b, TextBlock)]
    assert len(texts) == 2 and "stamping the release is public" in texts[0] and "interrupted" in texts[1]
    assert rebuild_history(events) == history


async def test_a_resume_after_a_rejection_keeps_the_refusals_and_does_not_ask_again(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("keep")
    agent = ScriptedModel.from_turns(
        [
            {"tool_calls": [{"name": "shell__run", "arguments": {"command": "rm keep.txt"}}]},
            {"text": "thinking for a long time", "delay_s": 30},
        ]
    )
    first = ScriptedModel.from_turns([verdict("reject", "keep.txt is the user's")])
    from servers import shell

    async with CheckpointStore(tmp_path / "loom.db") as store:
        async with Hub({"shell": shell.build_server(tmp_path, sandbox="off")}) as hub:
            w = World(tmp_path, EventLog(store), hub)
            await interrupt_when(
                w,
                agent,
                Advisor(first, "lightweight", cwd=str(tmp_path)),
                lambda es: any(e.type == "tool_call_finished" for e in es),
            )
            agent2 = ScriptedModel.from_turns([{"text": "I left keep.txt alone."}])
            second = ScriptedModel.from_turns([verdict("approve")])
            status, events, _ = await resume(w, agent2, Advisor(second, "lightweight", cwd=str(tmp_path)))
    assert status == "completed" and (tmp_path / "keep.txt").read_text() == "keep"
    assert second.requests == [] and len([e for e in events if isinstance(e, AdvisorReviewed)]) == 1
    (resumed,) = [e for e in events if isinstance(e, RunResumed)]
    assert resumed.reused and not resumed.rerun and not resumed.unstarted
    shown = [b for b in agent2.requests[0].messages[2].content if isinstance(b, ToolResultBlock)]
    assert shown[0].is_error and "keep.txt is the user's" in shown[0].content


async def test_a_call_that_waited_for_approval_is_asked_about_again_but_the_advisor_is_not(tmp_path: Path) -> None:
    from servers import shell

    build = tmp_path / "build"
    build.mkdir()
    agent = ScriptedModel.from_turns(
        [{"tool_calls": [{"name": "shell__run", "arguments": {"command": "rm -r build"}}]}]
    )
    first = ScriptedModel.from_turns([verdict("warn", "build/ is regenerated anyway; fine")])
    async with CheckpointStore(tmp_path / "loom.db") as store:
        async with Hub({"shell": shell.build_server(tmp_path, sandbox="off")}) as hub:
            w = World(tmp_path, EventLog(store), hub)
            with anyio.CancelScope() as scope:  # Loom stops while the call waits for a person's approval
                async with anyio.create_task_group() as tg:
                    tg.start_soon(
                        lambda: w.run(
                            agent, Advisor(first, "lightweight", cwd=str(tmp_path)), mode="ask", headless=False
                        )
                    )
                    with anyio.fail_after(10):
                        while True:
                            if any(e.type == "approval_requested" for e in await w.events()):
                                break
                            await anyio.sleep(0.01)
                    scope.cancel()
            assert build.exists()
            agent2 = ScriptedModel.from_turns([{"text": "Removed."}])
            second = ScriptedModel.from_turns([verdict("reject", "asked twice")])
            ctx = w.context(agent2, Advisor(second, "lightweight", cwd=str(tmp_path)), mode="ask", headless=False)
            approvals = ctx.approvals
            assert approvals is not None
            point = find_resume_point(await w.events(), "r")
            async with anyio.create_task_group() as tg:
                outcome: list[str] = []

                async def go() -> None:
                    outcome.append((await resume_loop(ctx, point, headless=False)).status)

                tg.start_soon(go)
                with anyio.fail_after(10):
                    while True:
                        if approvals.pending:
                            break
                        await anyio.sleep(0.01)
                (pending,) = approvals.pending.values()
                await approvals.decide(pending.approval_id, "approve_once", "", "test")
            events = await w.events()
    assert outcome == ["completed"] and not build.exists()
    assert second.requests == [] and len([e for e in events if isinstance(e, AdvisorReviewed)]) == 1
    assert [e.type for e in events].count("approval_requested") == 2  # policy asked again, the advisor did not
    texts = [b.text for b in agent2.requests[0].messages[2].content if isinstance(b, TextBlock)]
    assert "build/ is regenerated anyway; fine" in texts[0]
