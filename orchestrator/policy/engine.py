"""The policy decision for one tool call: allow, ask or deny, and why.

Order of precedence, in every mode:

1. A matching ``deny`` rule denies. Nothing overrides it, not even ``bypass``. Deny (and ask) rules match shell
   commands by the program they run, through wrappers and git's global options (:mod:`orchestrator.policy.programs`).
2. ``plan`` mode denies anything not read-only, saying why, so the model can plan instead.
3. What cannot be checked against the tool's ``deny`` rules is asked about (also in ``bypass``): "deny always wins"
   would be hollow if ``sh -c 'rm -rf ~'`` slipped past ``deny rm *``. That is a shell command line that is not
   one plain command, or one whose program cannot be known for sure (``env -S``, an unknown option of a wrapper),
   when a deny command rule exists; and a path that cannot be resolved, when a deny path rule exists.
4. ``bypass`` allows everything else.
5. Loom's own configuration (:mod:`orchestrator.policy.protected`): a call that is not read-only and names a
   protected path, or a shell command that mentions one, is asked about; so is any call naming a path that cannot
   be resolved. No allow rule and no mode default overrides this: a planted allow rule is exactly the attack.
6. A matching ``ask`` rule asks (as does a command that cannot be checked against an ask rule); then a matching
   ``allow`` rule allows. Allow rules match only the literal plain command, and never one of the write or exec forms
   in :mod:`orchestrator.policy.risky` unless the rule spells that word out.
7. The mode's default, from the tool's MCP annotations: read-only tools run; in ``accept-edits`` file edits inside
   the workspace and notes saved in Loom's memory also run; everything else asks. A tool without annotations is
   treated as side-effecting, since nothing says otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from orchestrator.hub.names import DELEGATING_SERVER, server_of
from orchestrator.policy.paths import ArgumentPaths, argument_paths, realpath, resolve
from orchestrator.policy.programs import Resolution
from orchestrator.policy.programs import resolve as resolve_command
from orchestrator.policy.protected import Protected
from orchestrator.policy.risky import Finding, findings
from orchestrator.policy.rules import Rule, matching
from orchestrator.policy.server_reads import read_of
from orchestrator.policy.shellwords import CommandLine, SimpleCommand, parse

if TYPE_CHECKING:  # annotations only: importing the MCP SDK costs ~0.6 s, which rule parsing must not pay
    from mcp import types as mt

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
        protected: The call is asked about because it could change Loom's own configuration (a protected path, a
            shell command mentioning one, or a path that cannot be resolved); callers must not let an earlier
            "approve for the session" cover it.
    """

    verdict: Verdict
    reason: str
    rule: Rule | None = None
    protected: bool = False


# What a person is told when Loom's own configuration is at stake.
_OWN_PERMISSIONS = "a model cannot change its own permissions without a person's approval"


@dataclass(frozen=True, slots=True)
class _Call:
    tool_name: str
    arguments: Mapping[str, Any]
    cwd: str
    line: CommandLine | None
    commands: tuple[Resolution, ...]
    paths: ArgumentPaths

    @property
    def unchecked(self) -> str:
        """Why the command line's programs cannot all be known, or ``""`` (also when there is no command)."""
        if self.line is None:
            return ""
        if self.line.line_reason:
            return f"the command is not a single plain command ({self.line.line_reason})"
        doubt = next((command.doubt for command in self.commands if command.doubt), "")
        return f"the program the command runs cannot be known for sure ({doubt})" if doubt else ""


def _unspelled(rule: Rule, command: SimpleCommand) -> Finding | None:
    """The first risky word of ``command`` that the rule's pattern does not spell out itself, if any."""
    spelled = rule.literal_positions()
    return next((finding for finding in findings(command.words) if finding.index not in spelled), None)


def _allowed_command(rule: Rule, command: SimpleCommand) -> bool:
    """An allow rule matches the literal command, unless a risky word in it is not one the rule spells out."""
    return rule.matches_command(command) and _unspelled(rule, command) is None


def _matches(rule: Rule, call: _Call, *, allow: bool) -> bool:
    """Whether ``rule`` (whose tool glob already matched) matches the call's arguments.

    Allow rules must match everything the call touches (the one plain command as written, every path); deny and
    ask rules match if anything does (any form of any command, any path).
    """
    if rule.command is not None:
        if call.line is None:
            return False
        if allow:
            return call.line.is_simple and _allowed_command(rule, call.line.commands[0])
        return any(rule.matches_program(form) for command in call.commands for form in command.forms)
    if rule.path is not None:
        if allow:
            paths = call.paths.resolved
            return bool(paths) and not call.paths.unresolved and all(rule.matches_path(p, call.cwd) for p in paths)
        candidates = [*call.paths.resolved, *(raw for raw, _ in call.paths.unresolved)]
        return any(rule.matches_path(path, call.cwd) for path in candidates)
    # A tool-wide allow rule still cannot vouch for a complex command line; only deny and ask may match those.
    return not (allow and call.line is not None and not call.line.is_simple)


def _first(rules: Sequence[Rule], call: _Call, *, allow: bool) -> Rule | None:
    return next((rule for rule in rules if _matches(rule, call, allow=allow)), None)


def _withheld(rules: Sequence[Rule], call: _Call) -> str:
    """Why an allow rule that matches the command as written does not admit it (a risky form), or ``""``."""
    if call.line is None or not call.line.is_simple:
        return ""
    command = call.line.commands[0]
    for rule in rules:
        if rule.command is not None and rule.matches_command(command):
            finding = _unspelled(rule, command)
            if finding is not None:
                word = command.words[finding.index]
                return f"; the allow rule {rule.describe()} does not cover {word!r}: {finding.reason}"
    return ""


def _cannot_check(call: _Call, unchecked: str, rules: Sequence[Rule], action: str) -> Decision | None:
    """Ask about a call that none of ``rules`` matched but that cannot be shown to avoid them either."""
    if unchecked:
        rule = next((r for r in rules if r.command is not None), None)
        if rule is not None:
            return Decision("ask", f"{unchecked}, so it cannot be checked against the {action} rule {rule.describe()}")
    if call.paths.unresolved:
        rule = next((r for r in rules if r.path is not None), None)
        if rule is not None:
            raw, why = call.paths.unresolved[0]
            return Decision(
                "ask",
                f"the path {raw!r} cannot be resolved ({why}), so it cannot be checked against the {action} rule "
                f"{rule.describe()}",
            )
    return None


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _workspace_edit(call: _Call, annotations: mt.ToolAnnotations | None) -> bool:
    """A non-open-world tool of Loom's file server whose every path resolves inside the workspace."""
    if server_of(call.tool_name) != FS_SERVER or annotations is None or annotations.open_world_hint:
        return False
    try:
        root = realpath(call.cwd)
    except OSError:
        return False
    paths = call.paths
    return bool(paths.resolved) and not paths.unresolved and all(_inside(path, root) for path in paths.resolved)


def _memory_note(call: _Call, annotations: mt.ToolAnnotations | None) -> bool:
    """A non-destructive tool of Loom's memory server (saving a note; deleting one is destructive)."""
    return server_of(call.tool_name) == MEMORY_SERVER and annotations is not None and not annotations.destructive_hint


def _shell_cwd(call: _Call) -> str | None:
    """The resolved ``cwd`` argument of a shell-style call (one with a command), None without one."""
    value = call.arguments.get("cwd")
    if call.line is None or not isinstance(value, str):
        return None
    try:
        return resolve(value, call.cwd)
    except OSError:
        return ""


def _guard(call: _Call, read_only: bool, protected: Protected | None) -> Decision | None:
    """Step 5: Loom's own configuration and paths that cannot be resolved; None when neither is at stake."""
    tool = call.tool_name
    if call.paths.unresolved:
        raw, why = call.paths.unresolved[0]
        if read_only:
            return Decision(
                "ask", f"{tool} names a path that cannot be resolved ({raw!r}: {why}), so no rule vouches for it"
            )
        return Decision(
            "ask",
            f"{tool} names a path that cannot be resolved ({raw!r}: {why}), which could be Loom's own "
            f"configuration; {_OWN_PERMISSIONS}",
            protected=True,
        )
    if protected is None or read_only:
        return None
    for path in call.paths.resolved:
        if protected.covers(path):
            shown = _shown(path, protected)
            why = f"{tool} would change Loom's own configuration ({shown}); {_OWN_PERMISSIONS}"
            return Decision("ask", why, protected=True)
    shell_cwd = _shell_cwd(call)
    if shell_cwd is not None and (shell_cwd == "" or protected.inside(shell_cwd)):
        return Decision(
            "ask",
            f"{tool} could change Loom's own configuration (it runs in {call.arguments['cwd']!r}); {_OWN_PERMISSIONS}",
            protected=True,
        )
    command = call.arguments.get("command")
    if call.line is None or not isinstance(command, str):
        return None
    try:
        runs_in = shell_cwd or realpath(call.cwd)
    except OSError:
        runs_in = None
    mention = protected.mentioned_in(command, runs_in)
    if mention:
        why = f"{tool} could change Loom's own configuration (its command mentions {mention}); {_OWN_PERMISSIONS}"
        return Decision("ask", why, protected=True)
    return None


def _shown(path: str, protected: Protected) -> str:
    """A protected path as a person recognises it: relative to a root or to ``$LOOM_HOME`` when inside one."""
    for base, prefix in [*((str(root), "") for root in protected.roots), (str(protected.home), "$LOOM_HOME/")]:
        if path.startswith(base.rstrip("/") + "/"):
            return prefix + path[len(base.rstrip("/")) + 1 :]
    return path


_RANK: dict[Verdict, int] = {"allow": 0, "ask": 1, "deny": 2}


def decide(
    mode: str,
    tool_name: str,
    annotations: mt.ToolAnnotations | None,
    arguments: Mapping[str, Any],
    rules: Sequence[Rule],
    cwd: str,
    protected: Protected | None = None,
) -> Decision:
    """Decide whether a tool call may run.

    An ``mcp_access`` call that names a server is also decided as a read-only tool of that server, and the
    stricter verdict wins, so a person's rules for the server hold for reading it (:mod:`.server_reads`).

    Args:
        mode: The session's mode: ``ask``, ``accept-edits``, ``plan`` or ``bypass``.
        tool_name: The namespaced tool name (``shell__run``, ``fs__write``, ``github__create_issue``).
        annotations: The tool's MCP annotations, or None when the server gave none.
        arguments: The call's arguments; ``command`` is parsed as a shell command line, path arguments are
            resolved against ``cwd``.
        rules: User and project rules combined; their order does not matter.
        cwd: The session's working directory (the workspace).
        protected: Loom's own configuration for this session; None checks no protected paths (paths that cannot
            be resolved are still asked about).

    Returns:
        The decision and its reason.

    Raises:
        ValueError: ``mode`` is not a known mode.
    """
    decision = _decide(mode, tool_name, annotations, arguments, rules, cwd, protected)
    read = read_of(tool_name, arguments)
    if read is None or decision.verdict == "deny":
        return decision
    if read.refused:
        return Decision("deny", f"denied by policy: {read.refused}")
    theirs = _decide(mode, read.tool_name, annotations, read.arguments, rules, cwd, protected)
    if _RANK[theirs.verdict] <= _RANK[decision.verdict]:
        return decision
    return replace(theirs, reason=f"reading server {read.server!r} through {tool_name}: {theirs.reason}")


def _decide(
    mode: str,
    tool_name: str,
    annotations: mt.ToolAnnotations | None,
    arguments: Mapping[str, Any],
    rules: Sequence[Rule],
    cwd: str,
    protected: Protected | None,
) -> Decision:
    """`decide` for the call as named, without what it reads through ``mcp_access``."""
    if mode not in MODES:
        raise ValueError(f"unknown policy mode {mode!r}; expected one of {', '.join(MODES)}")
    command = arguments.get("command")
    line = parse(command) if isinstance(command, str) else None
    commands = tuple(resolve_command(c.words) for c in line.commands) if line is not None else ()
    call = _Call(tool_name, arguments, cwd, line, commands, argument_paths(arguments, cwd))
    read_only = annotations is not None and annotations.read_only_hint is True

    deny_rules = matching(rules, "deny", tool_name)
    rule = _first(deny_rules, call, allow=False)
    if rule is not None:
        return Decision("deny", f"denied by policy rule: {rule.describe()}", rule)
    if server_of(tool_name) == DELEGATING_SERVER:
        # Starting or driving a child frees nothing: every call the child makes is decided by its own bounds and
        # by this session's (orchestrator/policy/narrowing.py), so spawning is allowed in every mode, plan too (a
        # plan session's children are plan sessions). A person's deny or ask rule for it still holds.
        rule = _first(matching(rules, "ask", tool_name), call, allow=False)
        if rule is not None:
            return Decision("ask", f"policy rule says to ask: {rule.describe()}", rule)
        return Decision("allow", "a child is bounded by this session's policy")
    if mode == "plan" and not read_only:
        return Decision("deny", f"denied by policy: plan mode is read-only and {tool_name} may change things")
    unchecked = call.unchecked
    decision = _cannot_check(call, unchecked, deny_rules, "deny")
    if decision is not None:
        return decision
    if mode == "bypass":
        return Decision("allow", "bypass mode")

    decision = _guard(call, read_only, protected)
    if decision is not None:
        return decision
    ask_rules = matching(rules, "ask", tool_name)
    rule = _first(ask_rules, call, allow=False)
    if rule is not None:
        return Decision("ask", f"policy rule says to ask: {rule.describe()}", rule)
    decision = _cannot_check(call, unchecked, ask_rules, "ask")
    if decision is not None:
        return decision
    allow_rules = matching(rules, "allow", tool_name)
    rule = _first(allow_rules, call, allow=True)
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
    return Decision("ask", f"{tool_name} {what}, and the session's mode is {mode!r}{_withheld(allow_rules, call)}")
