"""Policy rules: ``allow`` / ``ask`` / ``deny`` on a namespaced tool name and, optionally, its arguments.

A rule file is TOML with one ``[[rules]]`` table per rule::

    [[rules]]
    action = "allow"
    tool = "shell__run"
    command = "git status"

    [[rules]]
    action = "deny"
    tool = "fs__*"
    path = "/etc/**"

``tool`` is a glob over the namespaced name (``shell__run``, ``fs__*``, ``github__*``). ``command`` is a prefix of
words matched against a shell command parsed by :mod:`orchestrator.policy.shellwords`; ``path`` is a glob matched
against the resolved paths of a file tool's arguments. Rules load from ``$LOOM_HOME/policy.toml`` and then
``PROJECT/.loom/policy.toml`` and combine; which rule wins is decided by action, not by file (deny, then ask, then
allow), so a project cannot loosen a user's deny. A bad file is an error naming the file and the line or rule,
never a silent fallback to no rules.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, cast

from orchestrator.home import loom_home
from orchestrator.policy.paths import PATH_KEYS, path_arguments, realpath
from orchestrator.policy.programs import program_name
from orchestrator.policy.shellwords import SimpleCommand

__all__ = [
    "ACTIONS",
    "PATH_KEYS",
    "Action",
    "PolicyError",
    "Rule",
    "load_file",
    "load_rules",
    "path_arguments",
    "policy_files",
]

Action = Literal["allow", "ask", "deny"]
ACTIONS: tuple[Action, ...] = ("allow", "ask", "deny")
_KEYS = frozenset({"action", "tool", "command", "path"})


class PolicyError(Exception):
    """A rule file is unusable; the message names the file and the line or rule."""


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule.

    Attributes:
        action: What the rule says when it matches.
        tool: Glob over the namespaced tool name.
        command: Word prefix for a shell command (``git log *``), or None.
        path: Glob over resolved paths, or None.
        source: Where the rule came from (``file: rules[2]``), for reasons shown to people.
    """

    action: Action
    tool: str
    command: str | None = None
    path: str | None = None
    source: str = ""

    @property
    def command_words(self) -> tuple[str, ...]:
        """The command pattern split into words (validated when the rule is built)."""
        return tuple(shlex.split(self.command)) if self.command is not None else ()

    def matches_tool(self, tool_name: str) -> bool:
        """Whether the tool glob matches ``tool_name`` (case-sensitive)."""
        return fnmatch.fnmatchcase(tool_name, self.tool)

    def matches_command(self, command: SimpleCommand) -> bool:
        """Whether ``command`` starts with the pattern's words.

        A ``*`` word matches any one word, except as the last word, where it matches whatever follows (also
        nothing). Other words are exact: ``git status`` never matches ``/usr/bin/git status`` or ``git statusx``.
        """
        pattern = self.command_words
        if pattern and pattern[-1] == "*":
            pattern = pattern[:-1]
        if len(command.words) < len(pattern):
            return False
        return all(want == "*" or want == got for want, got in zip(pattern, command.words, strict=False))

    def matches_program(self, form: Sequence[str]) -> bool:
        """Whether a form of a command starts with the pattern's words, the way deny and ask rules match.

        ``form`` is one of :func:`~orchestrator.policy.programs.resolve`'s forms. The program is compared by name
        and every word case-insensitively.
        ``rm *`` matches ``rm``, ``/bin/rm`` and ``RM``; ``/usr/bin/curl *`` matches ``curl``. Both widen what a
        deny or ask rule catches, which is the safe direction; a case-insensitive filesystem runs ``RM`` as ``rm``.
        """
        pattern = self.command_words
        if pattern and pattern[-1] == "*":
            pattern = pattern[:-1]
        if not pattern or len(form) < len(pattern):
            return False
        want = (program_name(pattern[0]), *pattern[1:])
        return all(w == "*" or w.casefold() == g.casefold() for w, g in zip(want, form, strict=False))

    def literal_positions(self) -> frozenset[int]:
        """The word positions the command pattern spells out (not ``*``): what an allow rule vouches for by name."""
        return frozenset(i for i, word in enumerate(self.command_words) if word != "*")

    def matches_path(self, resolved: str, cwd: str) -> bool:
        """Whether a resolved path matches the rule's glob (relative globs are relative to ``cwd``)."""
        if self.path is None:
            return False
        return _path_regex(self.path, _resolved_or_normal(cwd)).fullmatch(resolved) is not None

    def describe(self) -> str:
        """A short human description, e.g. ``deny shell__run "rm *" (~/.loom/policy.toml: rules[0])``."""
        what = f" {self.command!r}" if self.command is not None else f" path {self.path!r}" if self.path else ""
        where = f" ({self.source})" if self.source else ""
        return f"{self.action} {self.tool}{what}{where}"


def _resolved_or_normal(path: str) -> str:
    # A rule's own directory that cannot be resolved is compared as written; the call's paths carry the doubt.
    try:
        return realpath(path)
    except OSError:
        return os.path.normpath(path)


def _path_regex(pattern: str, cwd: str) -> re.Pattern[str]:
    """``**`` crosses directories, ``*`` and ``?`` stay within one; ``dir/**`` also matches ``dir`` itself."""
    pattern = os.path.expanduser(pattern)
    if not os.path.isabs(pattern):
        pattern = os.path.join(cwd, pattern)
    # Resolve symlinks in the literal directories before the first wildcard, as call paths are resolved too, so a
    # rule written against a symlinked workspace still matches.
    parts = os.path.normpath(pattern).split("/")
    first_glob = next((i for i, part in enumerate(parts) if "*" in part or "?" in part), len(parts))
    head = _resolved_or_normal("/".join(parts[:first_glob]) or "/")
    rest = parts[first_glob:]
    pattern = head.rstrip("/") + "/" + "/".join(rest) if rest else head
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("/**", i) and (i + 3 == len(pattern) or pattern[i + 3] == "/"):
            out.append("(?:/.*)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out), re.DOTALL)


def _rule_from(table: object, source: str) -> Rule:
    if not isinstance(table, dict):
        raise PolicyError(f"{source}: a rule must be a table, not {type(table).__name__}")
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise PolicyError(f"{source}: unknown key(s) {', '.join(unknown)}; expected action, tool, command or path")
    action = table.get("action")
    if action not in ACTIONS:
        raise PolicyError(f"{source}: action must be one of allow, ask, deny (got {action!r})")
    tool = table.get("tool")
    if not isinstance(tool, str) or not tool:
        raise PolicyError(f"{source}: tool must be a non-empty string glob such as 'shell__run' or 'fs__*'")
    command, path = table.get("command"), table.get("path")
    if command is not None and path is not None:
        raise PolicyError(f"{source}: a rule has either command or path, not both")
    if command is not None:
        if not isinstance(command, str) or not command.strip():
            raise PolicyError(f"{source}: command must be a non-empty string such as 'git status'")
        try:
            words = shlex.split(command)
        except ValueError as exc:
            raise PolicyError(f"{source}: command {command!r} cannot be split into words ({exc})") from None
        if not words or words[0] == "*":
            raise PolicyError(f"{source}: command must start with a program name, not {command!r}")
    if path is not None and (not isinstance(path, str) or not path):
        raise PolicyError(f"{source}: path must be a non-empty string glob such as 'src/**'")
    return Rule(cast(Action, action), tool, command, path, source)


def parse_rules(text: str, file: str) -> list[Rule]:
    """Parse the TOML text of a rule file.

    Args:
        text: The file's contents.
        file: The file's name, used in error messages.

    Returns:
        The rules in file order.

    Raises:
        PolicyError: The TOML is invalid (the message carries tomllib's line and column) or a rule is not valid
            (the message names ``rules[i]``).
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(f"{file}: invalid TOML: {exc}") from None
    unknown = sorted(set(data) - {"rules"})
    if unknown:
        raise PolicyError(f"{file}: unknown top-level key(s) {', '.join(unknown)}; rules go in [[rules]] tables")
    tables = data.get("rules", [])
    if not isinstance(tables, list):
        raise PolicyError(f"{file}: 'rules' must be an array of tables ([[rules]])")
    return [_rule_from(table, f"{file}: rules[{index}]") for index, table in enumerate(tables)]


def load_file(path: Path) -> list[Rule]:
    """Load one rule file; a missing file has no rules.

    Raises:
        PolicyError: The file cannot be read or is not a valid rule file.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyError(f"{path}: cannot read rule file: {exc}") from None
    return parse_rules(text, str(path))


def policy_files(project: Path | None) -> list[Path]:
    """The rule files in load order: user (``$LOOM_HOME/policy.toml``), then project (``.loom/policy.toml``)."""
    files = [loom_home() / "policy.toml"]
    if project is not None:
        files.append(project / ".loom" / "policy.toml")
    return files


def load_rules(project: Path | None, files: Iterable[Path] | None = None) -> list[Rule]:
    """Load and combine the user's and the project's rules.

    Args:
        project: The project directory, or None for user rules only.
        files: Explicit rule files instead of the default ones.

    Returns:
        All rules, user rules first. Order does not decide precedence; the action does.

    Raises:
        PolicyError: Any file is invalid.
    """
    rules: list[Rule] = []
    for file in files if files is not None else policy_files(project):
        rules.extend(load_file(file))
    return rules


def matching(rules: Sequence[Rule], action: Action, tool_name: str) -> list[Rule]:
    """The rules with ``action`` whose tool glob matches ``tool_name``."""
    return [rule for rule in rules if rule.action == action and rule.matches_tool(tool_name)]
