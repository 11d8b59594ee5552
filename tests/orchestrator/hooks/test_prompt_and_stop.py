"""UserPromptSubmit, Stop, SessionStart and PreCompact hooks in real sessions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.config import LoomConfig, ShellOptions
from orchestrator.context.history import rebuild_history
from orchestrator.events import RunFinished, UserMessage
from orchestrator.messages import Message, TextBlock
from orchestrator.policy.narrowing import Bounds
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.lineage import Lineage
from orchestrator.runtime.runtime import ChildOpening
from tests.orchestrator.hooks.support import handler, hook_runs, opened, script, turns, write_hooks

pytestmark = pytest.mark.anyio

# Sends the run on once: the first time it says "block", then (stop_hook_active) lets it end.
STOP_ONCE = """
import json, sys
data = json.load(sys.stdin)
if not data["stop_hook_active"]:
    print(json.dumps({"decision": "block", "reason": "run the tests before you finish"}))
"""

GUARD_PROMPT = """
import json, sys
data = json.load(sys.stdin)
if "password" in data["prompt"]:
    print("prompts must not contain passwords", file=sys.stderr)
    sys.exit(2)
print("The branch is feature/hooks.")
"""


def texts(message: Message) -> list[str]:
    return [b.text for b in message.content if isinstance(b, TextBlock)]


async def test_a_stop_hook_sends_the_run_on_exactly_once(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    write_hooks(home / "hooks.json", {"Stop": [{"hooks": [handler(script(tmp_path, "stop", STOP_ONCE))]}]})
    model = turns({"text": "All done."}, {"text": "Tests pass; done now."}, {"text": "never asked"})
    async with opened(home, work, model) as (runtime, session):
        result = await session.run("fix it")
        events = await runtime.log.store.read_events(session.id)
        live = list(session.history)
    assert (result.status, result.final_text, result.steps) == ("completed", "Tests pass; done now.", 2)
    assert len(model.requests) == 2
    second = model.requests[1].messages
    assert texts(second[2]) == ["[Loom: a Stop hook did not let the run end yet] run the tests before you finish"]
    assert [(r.outcome, r.context != "") for r in hook_runs(events)] == [("block", True), ("ok", False)]
    # The first answer was stored before the run went on, and a rebuilt history is what the model saw.
    assert rebuild_history(events) == live


async def test_a_stop_hook_that_always_blocks_is_bounded(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    always = script(tmp_path, "always", 'print(\'{"decision": "block", "reason": "again"}\')\n')
    write_hooks(home / "hooks.json", {"Stop": [{"hooks": [handler(always)]}]})
    model = turns(*({"text": f"answer {i}"} for i in range(10)))
    async with opened(home, work, model) as (runtime, session):
        result = await session.run("go")
    assert (result.status, result.steps) == ("completed", 4)  # the answer, then three continuations


async def test_a_crashing_stop_hook_fails_the_run_and_says_so(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    write_hooks(home / "hooks.json", {"Stop": [{"hooks": [handler("exit 3")]}]})
    async with opened(home, work, turns({"text": "done"})) as (_, session):
        result = await session.run("go")
    assert result.status == "failed" and "exited with status 3" in result.reason and "onError" in result.reason


async def test_user_prompt_submit_blocks_a_prompt_before_the_model_or_the_store_sees_it(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    write_hooks(home / "hooks.json", {"UserPromptSubmit": [{"hooks": [handler(script(tmp_path, "g", GUARD_PROMPT))]}]})
    model = turns({"text": "first answer"}, {"text": "second answer"})
    async with opened(home, work, model) as (runtime, session):
        blocked = await session.run("my password is hunter2")
        allowed = await session.run("what branch?")
        events = await runtime.log.store.read_events(session.id)
        live = list(session.history)
    assert blocked.status == "failed" and "prompts must not contain passwords" in blocked.reason
    assert "UserPromptSubmit" in blocked.reason
    assert not any("hunter2" in json.dumps(e.model_dump()) for e in events)
    assert [e.text for e in events if isinstance(e, UserMessage)] == ["what branch?"]
    assert len(model.requests) == 1
    assert texts(model.requests[0].messages[0]) == ["what branch?", "The branch is feature/hooks."]
    assert allowed.status == "completed"
    assert [r.status for r in events if isinstance(r, RunFinished)] == ["failed", "completed"]
    assert rebuild_history(events) == live
    async with embedded_runtime(home) as runtime:  # reopened: the same history from the store
        assert rebuild_history(await runtime.log.store.read_events(session.id)) == live


async def test_session_start_context_reaches_the_model_and_pre_compact_runs_on_a_manual_compaction(
    tmp_path: Path,
) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    seen = tmp_path / "compact.json"
    pre = script(tmp_path, "pre", f"import sys\nopen({str(seen)!r}, 'w').write(sys.stdin.read())\n")
    write_hooks(
        home / "hooks.json",
        {
            "SessionStart": [{"matcher": "startup", "hooks": [handler("echo 'Remember: the CI is red.'")]}],
            "PreCompact": [{"matcher": "manual", "hooks": [handler(pre)]}],
        },
    )
    model = turns({"text": "ok"}, {"text": "## Goal\nx"})
    async with opened(home, work, model) as (runtime, session):
        await session.run("hello")
        await session.compact(focus="keep the CI notes")
        events = await runtime.log.store.read_events(session.id)
    assert "Remember: the CI is red." in model.requests[0].system
    assert [r.hook_event for r in hook_runs(events)][:1] == ["SessionStart"]
    payload = json.loads(seen.read_text())
    assert (payload["hook_event_name"], payload["trigger"], payload["custom_instructions"]) == (
        "PreCompact",
        "manual",
        "keep the CI notes",
    )


async def test_no_hooks_file_means_no_hooks_object(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    async with opened(tmp_path / "home", work, turns({"text": "ok"})) as (_, session):
        assert session.hooks is None and session.compactor.hooks is None
        await session.run("hi")


async def test_a_child_session_fires_subagent_stop_not_stop(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    marks = tmp_path / "marks"
    mark = script(
        tmp_path,
        "mark",
        f"import json, sys\nopen({str(marks)!r}, 'a').write(json.load(sys.stdin)['hook_event_name'] + '\\n')\n",
    )
    write_hooks(
        home / "hooks.json", {"Stop": [{"hooks": [handler(mark)]}], "SubagentStop": [{"hooks": [handler(mark)]}]}
    )
    bounds = Bounds(label="the parent", mode="bypass", rules=(), cwd=str(work), headless=True)
    child = ChildOpening(bounds=bounds, lineage=Lineage("s_parent", "r_parent", ("s_parent",), "worker", ""))
    async with embedded_runtime(home, config=LoomConfig(shell=ShellOptions(sandbox="off"))) as runtime:
        async with runtime.open_session(work, turns({"text": "child done"}), child=child) as session:
            result = await session.run("do the task")
    assert result.status == "completed"
    assert marks.read_text().splitlines() == ["SubagentStop"]
