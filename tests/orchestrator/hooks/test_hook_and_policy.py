"""How a PreToolUse hook's decision and policy combine: a hook can only make a call stricter, never freer."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from orchestrator.events import ApprovalRequested, ToolCallFinished
from orchestrator.runtime.runtime import Session
from tests.orchestrator.hooks.support import call, handler, hook_runs, opened, script, turns, write_hooks

pytestmark = pytest.mark.anyio


def deciding(decision: str) -> str:
    return (
        "import json\nprint(json.dumps({'hookSpecificOutput': {'hookEventName': 'PreToolUse', "
        f"'permissionDecision': {decision!r}, 'permissionDecisionReason': 'the hook says {decision}'}}}}))\n"
    )


async def first_approval(session: Session) -> str:
    with anyio.fail_after(20):
        while True:
            if session.approvals.pending:
                [pending] = session.approvals.pending.values()
                return pending.approval_id
            await anyio.sleep(0.02)


async def test_a_hook_that_asks_is_asked_about_even_where_policy_allows(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    write_hooks(home / "hooks.json", {"PreToolUse": [{"hooks": [handler(script(tmp_path, "ask", deciding("ask")))]}]})
    model = turns({"tool_calls": [call("fs__write", path="a.txt", content="x")]}, {"text": "ok"})
    async with opened(home, work, model, mode="bypass", headless=False) as (runtime, session):
        async with anyio.create_task_group() as tg:
            tg.start_soon(session.run, "write")
            approval = await first_approval(session)
            await session.approvals.decide(approval, "approve_once", "", "test")
        events = await runtime.log.store.read_events(session.id)
    [asked] = [e for e in events if isinstance(e, ApprovalRequested)]
    assert "a PreToolUse hook asks for approval: the hook says ask" in asked.reason
    assert (work / "a.txt").read_text() == "x"

    # Headless, nobody can answer: the call is refused, never let through.
    model = turns({"tool_calls": [call("fs__write", path="b.txt", content="x")]}, {"text": "ok"})
    async with opened(home, work, model, mode="bypass", headless=True) as (runtime, session):
        await session.run("write")
        events = await runtime.log.store.read_events(session.id)
    [finished] = [e for e in events if isinstance(e, ToolCallFinished)]
    assert finished.failure == "denied" and "headless" in finished.content and not (work / "b.txt").exists()


async def test_a_hook_that_allows_does_not_skip_what_policy_asks_or_denies(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    write_hooks(home / "hooks.json", {"PreToolUse": [{"hooks": [handler(script(tmp_path, "yes", deciding("allow")))]}]})
    (home / "policy.toml").write_text('[[rules]]\naction = "deny"\ntool = "shell__run"\n', encoding="utf-8")
    model = turns(
        {"tool_calls": [call("fs__write", path="a.txt", content="x"), call("shell__run", command="echo hi")]},
        {"text": "ok"},
    )
    async with opened(home, work, model, mode="ask", headless=False) as (runtime, session):
        async with anyio.create_task_group() as tg:
            tg.start_soon(session.run, "write")
            approval = await first_approval(session)  # policy's ask for the write still stands
            await session.approvals.decide(approval, "deny", "not now", "test")
        events = await runtime.log.store.read_events(session.id)
    finished = {e.tool: e for e in events if isinstance(e, ToolCallFinished)}
    assert finished["shell__run"].failure == "denied" and "denied by policy" in finished["shell__run"].content
    assert finished["fs__write"].failure == "denied" and not (work / "a.txt").exists()
    assert [r.outcome for r in hook_runs(events)] == ["allow", "allow"]


async def test_matching_handlers_of_one_event_run_at_the_same_time_and_deny_wins(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    slow_allow = script(tmp_path, "slow_allow", "import time\ntime.sleep(1.5)\n" + deciding("allow"))
    slow_deny = script(tmp_path, "slow_deny", "import time\ntime.sleep(1.5)\n" + deciding("deny"))
    write_hooks(
        home / "hooks.json",
        {
            "PreToolUse": [
                {"matcher": "Write", "hooks": [handler(slow_allow)]},
                {"matcher": "fs__.*", "hooks": [handler(slow_deny)]},
            ]
        },
    )
    model = turns({"tool_calls": [call("fs__write", path="a.txt", content="x")]}, {"text": "ok"})
    async with opened(home, work, model) as (runtime, session):
        started = time.perf_counter()
        await session.run("write")
        took = time.perf_counter() - started
        events = await runtime.log.store.read_events(session.id)
    assert took < 2.8  # two 1.5 s hooks one after the other would take 3 s
    [finished] = [e for e in events if isinstance(e, ToolCallFinished)]
    assert finished.failure == "denied" and "the hook says deny" in finished.content
    assert sorted(r.outcome for r in hook_runs(events)) == ["allow", "deny"]
