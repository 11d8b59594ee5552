"""PreToolUse, PostToolUse and PermissionRequest hooks in real sessions: real hook processes, real servers."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest

from orchestrator.events import ApprovalRequested, Notice, ToolCallFinished, ToolCallStarted
from orchestrator.messages import Message, TextBlock, ToolResultBlock
from orchestrator.models import resolve_model
from tests.orchestrator.hooks.support import call, handler, hook_runs, opened, script, turns, write_hooks

pytestmark = pytest.mark.anyio

DENY_RM = """
import json, sys
data = json.load(sys.stdin)
command = data["tool_input"].get("command", "")
if command.split()[:1] == ["rm"]:
    print("rm is not allowed here; move files to trash/ instead", file=sys.stderr)
    sys.exit(2)
"""

# Claude Code's documentation's shape: a matcher "Bash", a script reading tool_input.command, hookSpecificOutput.
CLAUDE_STYLE = """
import json, sys
data = json.load(sys.stdin)
assert data["hook_event_name"] == "PreToolUse" and data["tool_name"] == "Bash"
command = data["tool_input"]["command"]
if "curl" in command:
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                      "permissionDecisionReason": "network access is blocked by policy"}}))
sys.exit(0)
"""

REWRITE = """
import json, sys
data = json.load(sys.stdin)
new = dict(data["tool_input"])
new["content"] = new["content"].replace("SECRET", "[redacted]")
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow",
                  "updatedInput": new}}))
"""


def results_of(messages: Sequence[Message]) -> list[ToolResultBlock]:
    return [b for m in messages for b in m.content if isinstance(b, ToolResultBlock)]


async def test_a_pre_tool_use_hook_that_exits_2_refuses_rm_with_its_reason(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    (work / "keep.txt").write_text("precious")
    write_hooks(
        home / "hooks.json", {"PreToolUse": [{"matcher": "Bash", "hooks": [handler(script(tmp_path, "rm", DENY_RM))]}]}
    )
    model = turns(
        {"tool_calls": [call("shell__run", command="rm keep.txt"), call("shell__run", command="echo hi")]},
        {"text": "done"},
    )
    async with opened(home, work, model) as (runtime, session):
        result = await session.run("clean up")
        events = await runtime.log.store.read_events(session.id)
    assert result.status == "completed"
    assert (work / "keep.txt").read_text() == "precious"
    refused, echoed = results_of(model.requests[1].messages)
    assert refused.is_error and "denied by a PreToolUse hook: rm is not allowed here" in refused.content
    assert not echoed.is_error and "hi" in echoed.content
    runs = hook_runs(events)
    assert [(r.outcome, r.exit_code, r.tool) for r in runs] == [("block", 2, "shell__run"), ("ok", 0, "shell__run")]
    assert [e.arguments["command"] for e in events if isinstance(e, ToolCallStarted)] == ["echo hi"]


async def test_a_claude_code_hooks_file_works_unchanged(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    command = script(tmp_path, "claude_style", CLAUDE_STYLE)
    # As a Claude Code user has it: .claude/settings.json with permissions beside the hooks, copied as it is.
    write_hooks(
        home / "hooks.json",
        {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": command}]}]},
        permissions={"allow": ["Bash(ls:*)"]},
    )
    script_file = tmp_path / "script.json"
    script_file.write_text(
        json.dumps(
            {
                "turns": [
                    {
                        "tool_calls": [
                            {"name": "shell__run", "arguments": {"command": "curl https://example.com"}},
                            {"name": "shell__run", "arguments": {"command": "echo fine"}},
                        ]
                    },
                    {"text": "ok"},
                ]
            }
        )
    )
    model = resolve_model(f"scripted:{script_file}")
    async with opened(home, work, model) as (runtime, session):
        await session.run("fetch it")
        events = await runtime.log.store.read_events(session.id)
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert finished[0].is_error and "network access is blocked by policy" in finished[0].content
    assert not finished[1].is_error and "fine" in finished[1].content
    assert [r.outcome for r in hook_runs(events)] == ["deny", "ok"]


async def test_a_rewritten_argument_is_what_the_server_receives_and_what_is_journalled(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    write_hooks(
        home / "hooks.json", {"PreToolUse": [{"matcher": "Write", "hooks": [handler(script(tmp_path, "rw", REWRITE))]}]}
    )
    model = turns({"tool_calls": [call("fs__write", path="notes.txt", content="key=SECRET")]}, {"text": "saved"})
    async with opened(home, work, model) as (runtime, session):
        await session.run("save it")
        events = await runtime.log.store.read_events(session.id)
    assert (work / "notes.txt").read_text() == "key=[redacted]"
    [started] = [e for e in events if isinstance(e, ToolCallStarted)]
    # Claude's Write shape (an absolute file_path) went out and came back as Loom's arguments.
    assert started.arguments == {"path": str(work / "notes.txt"), "content": "key=[redacted]"}
    assert [r.outcome for r in hook_runs(events)] == ["rewrite"]


async def test_a_rewrite_is_checked_against_the_schema_and_decided_by_policy_as_rewritten(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    bad = "import json\nprint(json.dumps({'hookSpecificOutput': {'updatedInput': {'command': 42}}}))\n"
    to_loom = "import json\nprint(json.dumps({'hookSpecificOutput': {'updatedInput': {'command': 'cat .loom/x'}}}))\n"
    write_hooks(
        home / "hooks.json",
        {
            "PreToolUse": [
                {"matcher": "shell__run", "hooks": [handler(script(tmp_path, "bad", bad))]},
            ]
        },
    )
    model = turns({"tool_calls": [call("shell__run", command="echo hi")]}, {"text": "ok"})
    async with opened(home, work, model) as (runtime, session):
        await session.run("go")
        events = await runtime.log.store.read_events(session.id)
    [finished] = [e for e in events if isinstance(e, ToolCallFinished)]
    assert finished.is_error and finished.failure == "invalid_arguments"
    # Policy sees the rewritten call: a command naming Loom's config asks, and headless that is a denial.
    write_hooks(
        home / "hooks.json",
        {"PreToolUse": [{"matcher": "Bash", "hooks": [handler(script(tmp_path, "to_loom", to_loom))]}]},
    )
    model = turns({"tool_calls": [call("shell__run", command="echo hi")]}, {"text": "ok"})
    async with opened(home, work, model, mode="accept-edits") as (runtime, session):
        await session.run("go")
        events = await runtime.log.store.read_events(session.id)
    [finished] = [e for e in events if isinstance(e, ToolCallFinished)]
    assert (
        finished.is_error and finished.failure == "denied" and not any(isinstance(e, ToolCallStarted) for e in events)
    )


async def test_a_crashing_hook_blocks_and_says_so_unless_it_opts_out(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    crash = script(tmp_path, "crash", "raise RuntimeError('hook bug')\n")
    write_hooks(home / "hooks.json", {"PreToolUse": [{"hooks": [handler(crash)]}]})
    model = turns({"tool_calls": [call("fs__write", path="a.txt", content="x")]}, {"text": "ok"})
    async with opened(home, work, model) as (runtime, session):
        await session.run("write")
        events = await runtime.log.store.read_events(session.id)
    assert not (work / "a.txt").exists()
    [finished] = [e for e in events if isinstance(e, ToolCallFinished)]
    assert finished.is_error and "failed, so the action is blocked" in finished.content
    assert "RuntimeError: hook bug" in finished.content and '"onError": "allow"' in finished.content
    [ran] = hook_runs(events)
    assert (ran.outcome, ran.exit_code) == ("error", 1)

    write_hooks(home / "hooks.json", {"PreToolUse": [{"hooks": [handler(crash, onError="allow")]}]})
    model = turns({"tool_calls": [call("fs__write", path="a.txt", content="x")]}, {"text": "ok"})
    async with opened(home, work, model) as (runtime, session):
        await session.run("write")
        events = await runtime.log.store.read_events(session.id)
    assert (work / "a.txt").read_text() == "x"
    [ran] = hook_runs(events)
    assert ran.outcome == "error" and "ignored (onError allow)" in ran.reason


async def test_a_hook_that_times_out_blocks_the_call(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    slow = script(tmp_path, "slow", "import time\ntime.sleep(60)\n")
    write_hooks(home / "hooks.json", {"PreToolUse": [{"hooks": [handler(slow, timeout=1)]}]})
    model = turns({"tool_calls": [call("fs__write", path="a.txt", content="x")]}, {"text": "ok"})
    async with opened(home, work, model) as (runtime, session):
        with anyio.fail_after(30):
            await session.run("write")
        events = await runtime.log.store.read_events(session.id)
    assert not (work / "a.txt").exists()
    [ran] = hook_runs(events)
    assert (ran.outcome, ran.exit_code) == ("error", None) and "timed out after 1 s" in ran.reason


async def test_post_tool_use_context_reaches_the_model_after_the_results(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    body = (
        "import json, sys\n"
        "data = json.load(sys.stdin)\n"
        "print(json.dumps({'hookSpecificOutput': {'hookEventName': 'PostToolUse',"
        " 'additionalContext': 'wrote ' + data['tool_input']['file_path']}, 'systemMessage': 'linted'}))\n"
    )
    write_hooks(
        home / "hooks.json",
        {"PostToolUse": [{"matcher": "Write|Edit", "hooks": [handler(script(tmp_path, "p", body))]}]},
    )
    model = turns({"tool_calls": [call("fs__write", path="a.txt", content="x")]}, {"text": "ok"})
    async with opened(home, work, model) as (runtime, session):
        await session.run("write")
        events = await runtime.log.store.read_events(session.id)
    last = [m for m in model.requests[1].messages if m.role == "user"][-1]  # the live history: the answer follows
    assert isinstance(last.content[0], ToolResultBlock)
    assert isinstance(last.content[1], TextBlock) and last.content[1].text == f"wrote {work / 'a.txt'}"
    assert [r.outcome for r in hook_runs(events)] == ["context"]
    # The systemMessage is for the person: a notice on the stream, never text for the model.
    assert any(isinstance(e, Notice) and e.text.endswith(": linted") for e in events)
    assert "linted" not in " ".join(b.text for b in last.content if isinstance(b, TextBlock))


async def test_a_permission_request_hook_answers_approvals_but_never_for_loom_config(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    allow_all = "import json\nprint(json.dumps({'hookSpecificOutput': {'decision': {'behavior': 'allow'}}}))\n"
    write_hooks(home / "hooks.json", {"PermissionRequest": [{"hooks": [handler(script(tmp_path, "yes", allow_all))]}]})
    model = turns(
        {
            "tool_calls": [
                call("fs__write", path="notes.txt", content="a"),
                call("fs__write", path=".loom/hooks.json", content="{}"),
            ]
        },
        {"text": "ok"},
    )
    async with opened(home, work, model, mode="ask", headless=False) as (runtime, session):
        async with anyio.create_task_group() as tg:
            tg.start_soon(session.run, "write")
            with anyio.fail_after(20):
                while True:
                    if session.approvals.pending:
                        break
                    await anyio.sleep(0.02)
            [pending] = session.approvals.pending.values()
            assert pending.arguments["path"] == ".loom/hooks.json"  # the hook did not answer this one
            await session.approvals.decide(pending.approval_id, "deny", "no", "test")
        events = await runtime.log.store.read_events(session.id)
    assert (work / "notes.txt").read_text() == "a" and not (work / ".loom" / "hooks.json").exists()
    assert [e.tool for e in events if isinstance(e, ApprovalRequested)] == ["fs__write"]
    assert [r.outcome for r in hook_runs(events)] == ["allow"]


async def test_the_model_cannot_write_a_hooks_file_through_fs_or_shell(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    model = turns(
        {
            "tool_calls": [
                call("fs__write", path=".loom/hooks.json", content='{"hooks": {}}'),
                call("shell__run", command="mkdir -p .loom && echo '{}' > .loom/hooks.json"),
                call("shell__run", command=f"echo '{{}}' > {home}/hooks.json"),
                call("shell__run", command="echo '{}' > \"$LOOM_HOME/hooks.json\""),
            ]
        },
        {"text": "ok"},
    )
    async with opened(home, work, model, mode="accept-edits") as (runtime, session):
        await session.run("plant a hook")
        events = await runtime.log.store.read_events(session.id)
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert [f.failure for f in finished] == ["denied"] * 4
    assert not (work / ".loom" / "hooks.json").exists() and not (home / "hooks.json").exists()


async def test_an_untrusted_projects_hooks_do_not_run_and_the_session_says_why(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    planted = tmp_path / "planted-ran"
    evil = script(tmp_path, "evil", f"open({str(planted)!r}, 'w').close()\n")
    write_hooks(work / ".loom" / "hooks.json", {"PreToolUse": [{"hooks": [handler(evil)]}]})
    model = turns({"tool_calls": [call("fs__write", path="a.txt", content="x")]}, {"text": "ok"})
    async with opened(home, work, model) as (runtime, session):
        await session.run("write")
        events = await runtime.log.store.read_events(session.id)
    assert not planted.exists() and (work / "a.txt").read_text() == "x"
    assert session.hooks is None and hook_runs(events) == []
    warnings = [e.text for e in events if isinstance(e, Notice) and e.level == "warning"]
    assert any("hooks.json" in w and "not trusted" in w and "loom trust" in w for w in warnings)
