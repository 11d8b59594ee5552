"""Reading what a hook said, as Claude Code reads it, except that a failing hook blocks unless it opts out."""

from __future__ import annotations

import json

import pytest

from orchestrator.hooks.config import HookEvent, HookHandler, OnError
from orchestrator.hooks.decisions import combine, decide
from orchestrator.hooks.runner import ProcessResult


def hook(on_error: OnError = "block") -> HookHandler:
    return HookHandler("PreToolUse", "", "check.sh", 60.0, on_error, "hooks.json", None)


def ran(code: int | None, out: str = "", err: str = "", problem: str = "") -> ProcessResult:
    return ProcessResult(code, out, err, 1.0, problem)


def test_exit_2_blocks_with_stderr_as_the_reason() -> None:
    found = decide("PreToolUse", hook(), ran(2, err="no rm here\n"))
    assert (found.outcome, found.permission, found.block, found.reason) == ("block", "deny", True, "no rm here")


def test_claude_codes_json_decisions_are_read() -> None:
    out = {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "ask",
            "permissionDecisionReason": "check it",
        }
    }
    found = decide("PreToolUse", hook(), ran(0, json.dumps(out)))
    assert (found.outcome, found.permission, found.reason) == ("ask", "ask", "check it")
    rewrite = {"hookSpecificOutput": {"permissionDecision": "allow", "updatedInput": {"command": "ls"}}}
    found = decide("PreToolUse", hook(), ran(0, json.dumps(rewrite)))
    assert (found.outcome, found.updated_input) == ("rewrite", {"command": "ls"})
    context = {"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": "lint: 2 warnings"}}
    found = decide("PostToolUse", hook(), ran(0, json.dumps(context)))
    assert (found.outcome, found.context) == ("context", "lint: 2 warnings")
    found = decide("Stop", hook(), ran(0, json.dumps({"decision": "block", "reason": "tests fail"})))
    assert (found.block, found.reason) == (True, "tests fail")


@pytest.mark.parametrize("event", ["UserPromptSubmit", "SessionStart"])
def test_plain_stdout_is_context_only_where_claude_code_makes_it_so(event: HookEvent) -> None:
    assert decide(event, hook(), ran(0, "today is Tuesday\n")).context == "today is Tuesday"
    assert decide("PreToolUse", hook(), ran(0, "today is Tuesday\n")).outcome == "ok"


@pytest.mark.parametrize(
    ("result", "why"),
    [
        (ran(1, err="Traceback: boom"), "exited with status 1: Traceback: boom"),
        (ran(None, problem="timed out after 5 s and was killed"), "timed out after 5 s"),
        (ran(0, '{"decision": "block"'), "not valid JSON"),
        (ran(0, '["allow"]'), "must be an object"),
        (ran(0, json.dumps({"hookSpecificOutput": {"permissionDecision": "yes"}})), "permissionDecision"),
        (ran(0, json.dumps({"hookSpecificOutput": {"hookEventName": "Stop"}})), "hookEventName"),
        (ran(0, json.dumps({"continue": "no"})), "'continue'"),
    ],
)
def test_a_failing_hook_blocks_says_which_and_how_to_opt_out(result: ProcessResult, why: str) -> None:
    found = decide("PreToolUse", hook(), result)
    assert (found.outcome, found.permission, found.block, found.error) == ("error", "deny", True, True)
    assert why in found.reason and "check.sh" in found.reason and '"onError": "allow"' in found.reason
    allowed = decide("PreToolUse", hook("allow"), result)
    assert (allowed.outcome, allowed.block, allowed.permission) == ("error", False, None)


def test_the_most_restrictive_decision_wins() -> None:
    def said(decision: str) -> str:
        return json.dumps(
            {"hookSpecificOutput": {"permissionDecision": decision, "permissionDecisionReason": decision}}
        )

    allow, ask, deny = (decide("PreToolUse", hook(), ran(0, said(d))) for d in ("allow", "ask", "deny"))
    assert combine([allow, ask]).permission == "ask"
    assert combine([ask, deny, allow]).permission == "deny"
    blocked = decide("PreToolUse", hook(), ran(2, err="no"))
    assert combine([allow, blocked]).block
