"""The policy decision for one tool call: allow, ask or deny, and why.

Order of precedence, in every mode:

1. A matching ``deny`` rule denies. Nothing overrides it, not even ``bypass``.
2. ``plan`` mode denies anything not read-only, saying why, so the model can plan instead.
3. A shell command line too complex to check against the tool's ``deny`` command rules is asked about (also in
   ``bypass``): "deny always wins" would be hollow if ``sh -c 'rm -rf ~'`` slipped past ``deny rm *``.
4. ``bypass`` allows everything else.
5. A matching ``ask`` rule asks; then a matching ``allow`` rule allows.
6. The mode's default, from the tool's MCP annotations: read-only tools run; in ``accept-edits`` file edits inside
   the workspace and notes saved in Loom's memory also run; everything else asks. A tool without annotations is
   treated as side-effecting, since nothing says otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from mcp import types as mt

from orchestrator.policy.rules import Rule, command_matches, matching, path_arguments
from orchestrator.policy.shellwords import CommandLine, parse
from orchestrator.toolnames import server_of

__all__ = ["MODES", "Decision", "Mode", "Verdict", "decide"]

Mode = Literal["ask", "accept-edits", "plan", "bypass"]
MODES: tuple[Mode, ...] = ("ask", "accept-edits", "plan", "bypass")
Verdict = Literal["allow", "ask", "deny"]
# Loom's own file server; its non-read-only tools are the "edits" that accept-edits lets through in the workspace.
FS_SERVER = "fs"
# Loom's own notes: saving one is an edit of Loom's memory, which accept-edits lets through (deleting one asks).
MEMORY_SERVER = "memory"


@dataclass(frozen=True, slots=True)
class Decision:
    """What policy says about one call.

    Attributes:
        verdict: ``allow``, ``ask`` or ``deny``.
        reason: Why, in words fit for the model (when denied) or a person (when asked).
        rule: The rule that decided, or None when the mode's default did.
    """

    verdict: Verdict
    reason: str
    rule: Rule | None = None


@dataclass(frozen=True, slots=True)
class _Call:
    tool_name: str
    arguments: Mapping[str, Any]
    cwd: str
    line: CommandLine | None
    paths: list[str]


def _matches(rule: Rule, call: _Call, *, allow: bool) -> bool:
    """Whether ``rule`` (whose tool glob already matched) matches the call's arguments.

    Allow rules must match everything the call touches (the one plain command, every path); deny and ask rules
    match if anything does.
    """
    if rule.command is not None:
        return call.line is not None and command_matches(rule, call.line, allow=allow)
    if rule.path is not None:
        if not call.paths:
            return False
        hits = (rule.matches_path(path, call.cwd) for path in call.paths)
        return all(hits) if allow else any(hits)
    # A tool-wide allow rule still cannot vouch for a complex command line; only deny and ask may match those.
    return not (allow and call.line is not None and not call.line.is_simple)


def _first(rules: Sequence[Rule], call: _Call, *, allow: bool) -> Rule | None:
    return next((rule for rule in rules if _matches(rule, call, allow=allow)), None)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _workspace_edit(call: _Call, annotations: mt.ToolAnnotations | None) -> bool:
    """A non-open-world tool of Loom's file server whose every path resolves inside the workspace."""
    if server_of(call.tool_name) != FS_SERVER or annotations is None or annotations.open_world_hint:
        return False
    root = os.path.realpath(call.cwd)
    return bool(call.paths) and all(_inside(path, root) for path in call.paths)


def _memory_note(call: _Call, annotations: mt.ToolAnnotations | None) -> bool:
    """A non-destructive tool of Loom's memory server (saving a note; deleting one is destructive)."""
    return server_of(call.tool_name) == MEMORY_SERVER and annotations is not None and not annotations.destructive_hint


def decide(
    mode: str,
    tool_name: str,
    annotations: mt.ToolAnnotations | None,
    arguments: Mapping[str, Any],
    rules: Sequence[Rule],
    cwd: str,
) -> Decision:
    """Decide whether a tool call may run.

    Args:
        mode: The session's mode: ``ask``, ``accept-edits``, ``plan`` or ``bypass``.
        tool_name: The namespaced tool name (``shell__run``, ``fs__write``, ``github__create_issue``).
        annotations: The tool's MCP annotations, or None when the server gave none.
        arguments: The call's arguments; ``command`` is parsed as a shell command line, path arguments are
            resolved against ``cwd``.
        rules: User and project rules combined; their order does not matter.
        cwd: The session's working directory (the workspace).

    Returns:
        The decision and its reason.

    Raises:
        ValueError: ``mode`` is not a known mode.
    """
    if mode not in MODES:
        raise ValueError(f"unknown policy mode {mode!r}; expected one of {', '.join(MODES)}")
    command = arguments.get("command")
    call = _Call(
        tool_name,
        arguments,
        cwd,
        parse(command) if isinstance(command, str) else None,
        path_arguments(arguments, cwd),
    )
    read_only = annotations is not None and annotations.read_only_hint is True

    deny_rules = matching(rules, "deny", tool_name)
    rule = _first(deny_rules, call, allow=False)
    if rule is not None:
        return Decision("deny", f"denied by policy rule: {rule.describe()}", rule)
    if mode == "plan" and not read_only:
        return Decision("deny", f"denied by policy: plan mode is read-only and {tool_name} may change things")
    if call.line is not None and not call.line.is_simple:
        unchecked = next((r for r in deny_rules if r.command is not None), None)
        if unchecked is not None:
            return Decision(
                "ask",
                f"the command is not a single plain command ({call.line.complex_reason}), so it cannot be checked "
                f"against the deny rule {unchecked.describe()}",
            )
    if mode == "bypass":
        return Decision("allow", "bypass mode")

    rule = _first(matching(rules, "ask", tool_name), call, allow=False)
    if rule is not None:
        return Decision("ask", f"policy rule says to ask: {rule.describe()}", rule)
    rule = _first(matching(rules, "allow", tool_name), call, allow=True)
    if rule is not None:
        return Decision("allow", f"allowed by policy rule: {rule.describe()}", rule)

    if read_only:
        return Decision("allow", f"{tool_name} is read-only")
    if mode == "accept-edits" and _workspace_edit(call, annotations):
        return Decision(
            "allow", f"{tool_name} edits files inside the workspace, and the session's mode is 'accept-edits'"
        )
    if mode == "accept-edits" and _memory_note(call, annotations):
        return Decision("allow", f"{tool_name} saves a note in Loom's memory, and the session's mode is 'accept-edits'")
    what = (
        "has no MCP annotations, so it is treated as side-effecting"
        if annotations is None
        else "is not marked read-only"
    )
    return Decision("ask", f"{tool_name} {what}, and the session's mode is {mode!r}")
