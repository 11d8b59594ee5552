"""What one hook run decided, read from its exit code and output as Claude Code reads them, and how several combine.

- Exit 0: stdout may be JSON with Claude Code's fields (``continue``/``stopReason``, ``decision``/``reason``,
  ``systemMessage``, ``hookSpecificOutput``). Plain text that is not JSON is additional context for
  ``UserPromptSubmit`` and ``SessionStart`` (as in Claude Code) and ignored for the other events.
- Exit 2: block; stderr is the reason.
- Anything else — another exit code, a crash, a timeout, stdout that starts with ``{`` but does not parse, JSON of
  the wrong shape, a decision value Claude Code does not define — is an ``error``. Unlike Claude Code, an error
  blocks unless the handler says ``"onError": "allow"``; either way the run is recorded and says what went wrong.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from orchestrator.events_long import HookOutcome
from orchestrator.hooks.config import HookEvent, HookHandler
from orchestrator.hooks.runner import ProcessResult

__all__ = ["Decision", "combine", "decide"]

Permission = Literal["allow", "deny", "ask"]
_STRICTNESS: dict[Permission | None, int] = {None: 0, "allow": 1, "ask": 2, "deny": 3}
_TEXT_CONTEXT = ("UserPromptSubmit", "SessionStart")
_REASON_CHARS = 4000


@dataclass(frozen=True, slots=True)
class Decision:
    """What one handler's run decided (``outcome`` is what its ``hook_ran`` event records)."""

    outcome: HookOutcome
    reason: str = ""
    permission: Permission | None = None
    """PreToolUse's ``permissionDecision`` or PermissionRequest's ``behavior`` (an error or block is ``deny``)."""
    updated_input: dict[str, Any] | None = None
    context: str = ""
    """Additional context for the model, as the hook gave it."""
    block: bool = False
    """The action does not happen (exit 2, ``decision: block``, ``continue: false``, or an error that blocks)."""
    error: bool = False
    system_message: str = ""


def decide(event: HookEvent, handler: HookHandler, result: ProcessResult) -> Decision:
    """Read ``result`` of ``handler`` for ``event``; an error is turned into a block unless ``onError`` allows."""
    found = _read(event, result)
    if not found.error:
        return found
    where = f"hook {handler.command[:120]!r} ({event}, {handler.source})"
    if handler.on_error == "allow":
        return Decision("error", f"{where} failed and was ignored (onError allow): {found.reason}", error=True)
    why = (
        f'{where} failed, so the action is blocked: {found.reason}. Fix the hook, or set "onError": "allow" on it '
        "to let actions through when it fails"
    )
    return Decision("error", why, permission="deny", block=True, error=True)


def _failed(why: str) -> Decision:
    return Decision("error", why, error=True)


def _read(event: HookEvent, result: ProcessResult) -> Decision:
    if result.exit_code is None:
        return _failed(result.problem or "it did not exit")
    stderr = result.stderr.strip()[:_REASON_CHARS]
    if result.exit_code == 2:
        reason = stderr or "blocked by a hook (exit 2, no message on stderr)"
        return Decision("block", reason, permission="deny", block=True)
    if result.exit_code != 0:
        tail = f": {stderr[-500:]}" if stderr else " (nothing on stderr)"
        return _failed(f"it exited with status {result.exit_code}{tail}")
    text = result.stdout.strip()
    if not text:
        return Decision("ok")
    if not text.startswith(("{", "[")):  # JSON output is an object; a list is JSON of the wrong shape
        if event in _TEXT_CONTEXT:
            return Decision("context", context=text[: _REASON_CHARS * 4])
        return Decision("ok")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return _failed(f"its stdout starts with {text[0]!r} but is not valid JSON ({exc.msg} at line {exc.lineno})")
    if not isinstance(data, dict):
        return _failed("its JSON output must be an object")
    try:
        return _json(event, data)
    except _Malformed as exc:
        return _failed(f"its JSON output is malformed: {exc}")


class _Malformed(Exception):
    pass


def _text(data: dict[str, Any], key: str) -> str:
    value = data.get(key, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _Malformed(f"{key!r} must be a string")
    return value


def _json(event: HookEvent, data: dict[str, Any]) -> Decision:
    go_on = data.get("continue", True)
    if not isinstance(go_on, bool):
        raise _Malformed("'continue' must be true or false")
    reason = _text(data, "reason")
    message = _text(data, "systemMessage")[:_REASON_CHARS]
    decision = data.get("decision")
    specific = data.get("hookSpecificOutput") or {}
    if not isinstance(specific, dict):
        raise _Malformed("'hookSpecificOutput' must be an object")
    named = specific.get("hookEventName")
    if named is not None and named != event:
        raise _Malformed(f"hookSpecificOutput.hookEventName is {named!r}, but this is a {event} hook")
    context = _text(specific, "additionalContext")
    permission: Permission | None = None
    updated: dict[str, Any] | None = None
    if event == "PreToolUse":
        asked = specific.get("permissionDecision")
        if asked is not None and asked not in ("allow", "deny", "ask"):
            raise _Malformed(f"permissionDecision must be 'allow', 'deny' or 'ask', not {asked!r}")
        permission = asked
        reason = _text(specific, "permissionDecisionReason") or reason
        # Claude Code's older spelling: "decision": "approve" | "block".
        if permission is None and decision is not None:
            if decision not in ("approve", "block"):
                raise _Malformed(f"decision must be 'approve' or 'block', not {decision!r}")
            permission = "allow" if decision == "approve" else "deny"
        updated = _updated(specific.get("updatedInput"))
    elif event == "PermissionRequest":
        chosen = specific.get("decision")
        if chosen is not None:
            if not isinstance(chosen, dict) or chosen.get("behavior") not in ("allow", "deny"):
                raise _Malformed('hookSpecificOutput.decision must be {"behavior": "allow" | "deny", ...}')
            permission = chosen["behavior"]
            reason = _text(chosen, "message") or reason
            updated = _updated(chosen.get("updatedInput"))
    elif decision is not None and decision != "block":
        raise _Malformed(f"decision must be 'block' (or absent), not {decision!r}")
    block = decision == "block" and event not in ("PreToolUse", "PermissionRequest")
    if not go_on:
        stop = _text(data, "stopReason") or "a hook said not to continue"
        if event in ("Stop", "SubagentStop"):
            return Decision("ok", stop, system_message=message)  # not continuing is what stopping is
        return Decision("block", stop, permission="deny", block=True, system_message=message)
    if permission == "deny" or block:
        return Decision(
            "deny" if permission == "deny" else "block", reason, "deny", updated, context, True, system_message=message
        )
    outcome: HookOutcome = "ok"
    if updated is not None:
        outcome = "rewrite"
    elif permission is not None:
        outcome = permission
    elif context:
        outcome = "context"
    return Decision(outcome, reason, permission, updated, context, system_message=message)


def _updated(raw: object) -> dict[str, Any] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise _Malformed("updatedInput must be an object of the tool's arguments")
    return dict(raw)


def combine(decisions: Sequence[Decision]) -> Decision:
    """Several handlers' decisions on one action: the most restrictive wins (deny > ask > allow; any block wins).

    Contexts are joined in configuration order; of several rewrites the first in that order is taken.
    """
    if not decisions:
        return Decision("ok")
    blocking = [d for d in decisions if d.block]
    if blocking:
        first = blocking[0]
        return Decision(
            first.outcome, "; ".join(d.reason for d in blocking if d.reason), "deny", block=True, error=first.error
        )
    strictest = max(decisions, key=lambda d: _STRICTNESS[d.permission])
    updated = next((d.updated_input for d in decisions if d.updated_input is not None), None)
    context = "\n\n".join(d.context for d in decisions if d.context)
    return Decision(
        strictest.outcome if strictest.permission else ("rewrite" if updated is not None else "ok"),
        strictest.reason,
        strictest.permission,
        updated,
        context,
    )
