"""The tool policy: one decision (allow, ask or deny) for every tool call, from mode, annotations and rules."""

from __future__ import annotations

from orchestrator.policy.engine import MODES, Decision, Mode, Verdict, decide
from orchestrator.policy.protected import Protected
from orchestrator.policy.rules import PolicyError, Rule, load_rules
from orchestrator.policy.shellwords import CommandLine, SimpleCommand, parse

__all__ = [
    "MODES",
    "CommandLine",
    "Decision",
    "Mode",
    "PolicyError",
    "Protected",
    "Rule",
    "SimpleCommand",
    "Verdict",
    "decide",
    "load_rules",
    "parse",
]
