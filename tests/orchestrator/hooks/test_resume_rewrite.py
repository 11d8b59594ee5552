"""A call a PreToolUse hook rewrote, interrupted mid-call, is run again on resume with the rewritten arguments."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from orchestrator.events import ToolCallStarted
from orchestrator.events_long import HookRan
from tests.orchestrator.hooks.support import handler, script, write_hooks
from tests.orchestrator.loop.test_resume import World, interrupt

pytestmark = pytest.mark.anyio

REWRITE_TAG = """
import json, sys
data = json.load(sys.stdin)
assert data["tool_name"] == "mcp__rs__put", data["tool_name"]  # an external tool, by its Claude Code name
new = dict(data["tool_input"], tag="rewritten")
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", "updatedInput": new}}))
"""


async def test_resume_reruns_an_interrupted_rewritten_call_with_the_rewritten_arguments(tmp_path: Path) -> None:
    world = World(tmp_path, [{"name": "rs__put", "arguments": {"tag": "orig", "hold": True}}])
    write_hooks(
        world.home / "hooks.json",
        {
            "PreToolUse": [
                {"matcher": "mcp__rs__.*", "hooks": [handler(script(tmp_path, "tag", REWRITE_TAG))]},
            ]
        },
    )
    session_id, run_id = await interrupt(world, held=["rewritten"], done=[])
    assert (world.count("rewritten"), world.count("orig")) == (1, 0)
    async with world.host() as host:
        handle = await host.resume_run(run_id)
        with anyio.fail_after(20):
            await handle.done.wait()
        view = await host.view(run_id)
        events = await host.runtime.log.store.read_events(session_id, run_id=run_id)
    assert (view.status, view.final_text) == ("completed", "all done")
    # Idempotent, so run again on resume: with the arguments it started with, never the model's original ones.
    assert (world.count("rewritten"), world.count("orig")) == (2, 0)
    starts = [e.arguments["tag"] for e in events if isinstance(e, ToolCallStarted)]
    assert starts == ["rewritten", "rewritten"]
    assert len([e for e in events if isinstance(e, HookRan)]) == 1  # the resume did not ask the hook again
