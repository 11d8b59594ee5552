"""Hooks: commands the user configures to run at points of a session's life, in Claude Code's shape.

``$LOOM_HOME/hooks.json`` and a trusted project's ``.loom/hooks.json`` (:mod:`orchestrator.hooks.config`) name
commands for the events PreToolUse, PostToolUse, PermissionRequest, UserPromptSubmit, Stop, SubagentStop,
PreCompact, SessionStart and SessionEnd. Each command gets one JSON object on stdin and answers with its exit code
and output (:mod:`orchestrator.hooks.decisions`); it runs in its own process group with a timeout
(:mod:`orchestrator.hooks.runner`). A session's :class:`SessionHooks` is what the loop and the session call.
See docs/long-work.md ("Hooks").
"""

from __future__ import annotations

from orchestrator.hooks.config import EVENTS, HookEvent, HookHandler, HooksConfig, load_hooks, parse_hooks
from orchestrator.hooks.session import MAX_STOP_CONTINUATIONS, PreToolVerdict, SessionHooks

__all__ = [
    "EVENTS",
    "MAX_STOP_CONTINUATIONS",
    "HookEvent",
    "HookHandler",
    "HooksConfig",
    "PreToolVerdict",
    "SessionHooks",
    "load_hooks",
    "parse_hooks",
]
