"""The loop's seam: every model and tool call goes through ``ctx.steps``, so another engine can replay it.

``ReplayingSteps`` stands in for a durable execution engine (DBOS, Temporal): it records each step's
result under the step's identity and, on replay, returns the recorded result instead of acting. If
the loop reached a model or a tool any other way, the replay below would call them again.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from mcp.server.mcpserver import MCPServer

from orchestrator.hub.outcomes import ToolOutcome
from orchestrator.hub.pool import Hub
from orchestrator.loop.loop import RunContext, run_loop
from orchestrator.loop.steps import EmbeddedSteps
from orchestrator.messages import ToolUseBlock
from orchestrator.models.base import ModelRequest, ModelResponse, ToolSpec
from orchestrator.models.scripted import FunctionModel
from orchestrator.store.checkpoints import CheckpointStore
from orchestrator.store.eventlog import EventLog

pytestmark = pytest.mark.anyio


class ReplayingSteps(EmbeddedSteps):
    """Acts once per step identity; afterwards answers from its journal."""

    def __init__(self, journal: dict[tuple[str, int, str], Any]) -> None:
        self.journal = journal
        self.acted = 0

    async def model(self, ctx: RunContext, tools: Sequence[ToolSpec]) -> tuple[ModelResponse, float]:
        key = ("model", ctx.step, "")
        if key not in self.journal:
            self.acted += 1
            self.journal[key] = await super().model(ctx, tools)
        recorded: tuple[ModelResponse, float] = self.journal[key]
        return recorded

    async def tool(self, ctx: RunContext, use: ToolUseBlock) -> ToolOutcome:
        key = ("tool", ctx.step, use.id)
        if key not in self.journal:
            self.acted += 1
            self.journal[key] = await super().tool(ctx, use)
        recorded: ToolOutcome = self.journal[key]
        return recorded


def counting_server(executions: list[str]) -> MCPServer:
    server = MCPServer("count", log_level="WARNING")

    @server.tool()
    def bump(name: str) -> str:
        """Count one execution."""
        executions.append(name)
        return f"bumped {name} ({len(executions)})"

    return server


def script(request: ModelRequest) -> dict[str, Any]:
    turns = sum(1 for m in request.messages if m.role == "assistant")
    if turns < 3:
        return {"text": f"turn {turns}", "tool_calls": [{"name": "count__bump", "arguments": {"name": f"t{turns}"}}]}
    return {"text": "all bumped"}


async def test_a_replaying_engine_reruns_the_loop_without_repeating_any_effect(tmp_path: Path) -> None:
    executions: list[str] = []
    model_calls: list[int] = []

    def model_fn(request: ModelRequest) -> dict[str, Any]:
        model_calls.append(1)
        return script(request)

    journal: dict[tuple[str, int, str], Any] = {}
    results = []
    async with CheckpointStore(tmp_path / "loom.db") as store, Hub({"count": counting_server(executions)}) as hub:
        for attempt in range(2):  # the second pass is what an engine does after a crash: replay
            steps = ReplayingSteps(journal)
            ctx = RunContext(
                session_id="s",
                run_id="r",
                model=FunctionModel(model_fn),
                hub=hub,
                log=EventLog(store),
                system="",
                history=[],
                max_steps=10,
                steps=steps,
            )
            results.append((await run_loop(ctx), steps.acted, attempt))
    (first, acted_first, _), (second, acted_second, _) = results
    assert (first.status, first.final_text, first.steps) == ("completed", "all bumped", 4)
    assert (second.status, second.final_text, second.steps) == (first.status, first.final_text, first.steps)
    assert acted_first == 7 and acted_second == 0  # 4 model calls and 3 tool calls, then none
    assert executions == ["t0", "t1", "t2"] and len(model_calls) == 4
