"""Agent definitions: a named role a child session can be started as.

A definition is a markdown file with YAML front matter, in the format Claude Code reads from
``.claude/agents/*.md``, so existing definitions work unchanged::

    ---
    name: code-reviewer
    description: Reviews a change for bugs and missing tests. Use after code changes.
    tools: Read, Grep, Glob, Bash        # or a YAML list; omitted: every tool the parent has; []: none
    model: sonnet                        # inherit (the default), sonnet/opus/haiku, or a Loom spec
    mode: plan                           # or Claude Code's permissionMode: default, acceptEdits, plan, ...
    maxTurns: 20                         # or maxSteps: the child's step budget
    ---
    You are a senior reviewer. ...

The body is the child's system prompt. ``tools`` and ``disallowedTools`` take Claude Code's names or Loom's
(:mod:`orchestrator.agents.claude`); keys Loom does not use (``color``, ``skills``, ``hooks``, ``memory``...)
are ignored, as Claude Code ignores misspelled ones. What a definition asks for can only narrow its parent's
bounds (:mod:`orchestrator.policy.narrowing`): :meth:`AgentDefinition.request` is that request.

Parsing is strict about what could reach a model or an id: a name is a short lowercase identifier, the
description and prompt are bounded and free of control characters. Problems raise :class:`AgentError` with a
message naming the file and what to fix; the loader (:mod:`orchestrator.agents.loading`) collects them.
"""

from __future__ import annotations

import re
import shlex
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from orchestrator.agents.claude import PERMISSION_MODES, loom_tool, model_spec, valid_model
from orchestrator.context.skills import split_front_matter
from orchestrator.policy import Mode, Rule
from orchestrator.policy.narrowing import ChildRequest

__all__ = [
    "MAX_DESCRIPTION_CHARS",
    "MAX_PROMPT_CHARS",
    "NAME_PATTERN",
    "AgentDefinition",
    "AgentError",
    "Source",
    "parse_definition",
]

NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
"""A definition's name, matched in full: it goes into the spawn tool's description and into ids."""
MAX_DESCRIPTION_CHARS = 1024
"""Every description goes into the spawn tool's description; a long one crowds out the others."""
MAX_PROMPT_CHARS = 64_000
"""The body becomes the child's system prompt, which must leave room for the child's work."""
MAX_FRONT_MATTER_CHARS = 16_000
MAX_TOOLS = 128
"""Entries in ``tools`` or ``disallowedTools``: far more than any real definition."""
MAX_STEPS = 1000
"""The most steps a definition may give its child (the face's own limit for a run)."""
_MAX_ENTRY_CHARS = 200
_NAME_RULE = "use lowercase letters, digits, '-' and '_', starting with a letter or digit, at most 64 characters"
_MODES = ", ".join(PERMISSION_MODES)

Source = Literal["user", "project"]


class AgentError(Exception):
    """An agent definition is unusable; the message names the file and what to fix."""


@dataclass(frozen=True, slots=True)
class AgentDefinition:
    """One agent definition.

    Attributes:
        name: The ``name`` from the front matter.
        description: When to use it, whitespace kept as written.
        prompt: The body: the child's system prompt.
        path: The file it was read from.
        source: ``project`` (``<project>/.loom/agents``) or ``user`` (``$LOOM_HOME/agents``).
        tools: Globs over namespaced tool names the child may use, or None for every tool its parent may use.
        denied: ``disallowedTools`` as deny rules (``Bash(rm:*)`` denies ``rm *``; a pattern Loom cannot keep
            denies the whole tool).
        model: ``inherit``, a Claude Code alias, a Claude model id or a Loom spec; see :meth:`model_spec`.
        mode: The mode asked for, or None for the parent's.
        deny_asks: Nobody is asked: what would need an approval is denied (Claude Code's ``dontAsk``).
        max_steps: The child's step budget (``maxTurns`` / ``maxSteps``), or None for the caller's default.
        overrides: The user definition of the same name this project definition replaced, if any.
        notes: What was read but left out (a tool with no Loom equivalent, inline servers), one sentence each.
    """

    name: str
    description: str
    prompt: str
    path: Path
    source: Source
    tools: tuple[str, ...] | None = None
    denied: tuple[Rule, ...] = ()
    model: str = "inherit"
    mode: Mode | None = None
    deny_asks: bool = False
    max_steps: int | None = None
    overrides: Path | None = None
    notes: tuple[str, ...] = ()

    def model_spec(self, parent: str) -> tuple[str, str]:
        """The model spec the child runs on under a parent running ``parent``, and a note when it inherits."""
        return model_spec(self.model, parent)

    def request(self, *, allow: tuple[str, ...] | None = None, label: str | None = None) -> ChildRequest:
        """What a child started as this agent asks of its parent's bounds.

        Args:
            allow: The spawn call's own allow-list, which applies besides the definition's ``tools``.
            label: How reasons name the child; ``agent 'NAME'`` by default.
        """
        return ChildRequest(
            label=label or f"agent {self.name!r}",
            mode=self.mode,
            tools=self.tools,
            allow=allow,
            rules=self.denied,
            headless=self.deny_asks,
        )


def _control(text: str, *, format_too: bool) -> str | None:
    """The first control character (or, with ``format_too``, invisible format character) in ``text``."""
    bad = ("Cc", "Cf") if format_too else ("Cc",)
    return next((ch for ch in text if ch not in "\t\n\r" and unicodedata.category(ch) in bad), None)


def _load_yaml(front: str, where: Path) -> dict[str, Any]:
    import yaml  # only when there is a definition to read: every `loom` start would pay for it otherwise

    if len(front) > MAX_FRONT_MATTER_CHARS:
        raise AgentError(f"{where}: the front matter is {len(front):,} characters; keep it under 16,000")
    try:
        meta: Any = yaml.safe_load(front)
    except Exception as exc:
        # Not only YAMLError: a value such as 2024-13-45 parses as a date and then fails with ValueError.
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 2}" if mark is not None else ""  # the front matter starts on line 2
        problem = getattr(exc, "problem", None) or str(exc)
        raise AgentError(
            f"{where}: the front matter is not valid YAML{at} ({problem}); quote values that contain ': '"
        ) from None
    if not isinstance(meta, dict):
        raise AgentError(f"{where}: the front matter must be 'key: value' lines such as 'name: reviewer'")
    return {str(key): value for key, value in meta.items()}


def _entries(meta: Mapping[str, Any], key: str, where: Path) -> list[str] | None:
    """A ``tools``-style value as a list of entries: a comma-separated string or a list of strings."""
    value = meta.get(key)
    if value is None:
        return None
    if isinstance(value, str):
        entries = [part.strip() for part in value.split(",")]
        entries = [entry for entry in entries if entry]
    elif isinstance(value, list) and all(isinstance(item, str) for item in value):
        entries = [item.strip() for item in value]
    else:
        raise AgentError(f"{where}: {key} must be a comma-separated string or a list of tool names")
    if len(entries) > MAX_TOOLS:
        raise AgentError(f"{where}: {key} lists {len(entries)} entries; at most {MAX_TOOLS}")
    for entry in entries:
        if not entry or len(entry) > _MAX_ENTRY_CHARS or _control(entry, format_too=True) is not None:
            raise AgentError(f"{where}: {key} has an entry that is empty, too long or holds control characters")
    return entries


def _tools(meta: Mapping[str, Any], where: Path, notes: list[str]) -> tuple[str, ...] | None:
    entries = _entries(meta, "tools", where)
    if entries is None:
        return None
    globs: list[str] = []
    for entry in entries:
        glob, why = loom_tool(entry)
        if glob is None:
            notes.append(f"{where}: tools: {why}")  # left out: the child may do less, never more
        elif glob not in globs:
            globs.append(glob)
    return tuple(globs)


def _denied(meta: Mapping[str, Any], where: Path, notes: list[str]) -> tuple[Rule, ...]:
    """``disallowedTools`` as deny rules; what cannot be mapped exactly is denied more widely, never less."""
    source = f"{where}: disallowedTools"
    rules: list[Rule] = []
    for entry in _entries(meta, "disallowedTools", where) or []:
        head, paren, inner = entry.partition("(")
        glob, why = loom_tool(head.strip() if paren else entry)
        if glob is None:
            notes.append(f"{where}: disallowedTools: {why}")  # no such tool in Loom: nothing to deny
            continue
        command = _command_pattern(inner.removesuffix(")")) if paren and glob == "shell__run" else None
        if paren and command is None:
            notes.append(f"{where}: disallowedTools: {entry!r} denies all of {glob}, since its pattern cannot be kept")
        rule = Rule("deny", glob, command=command, source=source)
        if rule not in rules:
            rules.append(rule)
    return tuple(rules)


def _command_pattern(inner: str) -> str | None:
    """Claude Code's ``Bash(git push:*)`` as a Loom command pattern (``git push *``), or None if it is not one."""
    pattern = inner.strip()
    pattern = pattern[:-2].rstrip() + " *" if pattern.endswith(":*") else pattern
    try:
        words = shlex.split(pattern)
    except ValueError:
        return None
    return pattern if words and words[0] != "*" else None


def _shown(value: object) -> str:
    """A value for a message: a short repr of a scalar, the type of anything else.

    Never the repr of a list or mapping: YAML aliases can nest one small document into a structure whose text
    is exponentially long (the "billion laughs"), which ``safe_load`` builds cheaply but ``repr`` would not.
    """
    if value is None or isinstance(value, str | int | float | bool):
        text = repr(value)
        return text if len(text) <= 80 else text[:77] + "..."
    return f"a {type(value).__name__}"


def _one_of(meta: Mapping[str, Any], keys: tuple[str, ...], where: Path) -> tuple[str, Any] | None:
    """The one key of ``keys`` the front matter sets, or None; two that disagree are an error."""
    found = [(key, meta[key]) for key in keys if meta.get(key) is not None]
    scalar = all(isinstance(value, str | int | float | bool) for _, value in found)
    if len(found) > 1 and (not scalar or len({(type(value).__name__, value) for _, value in found}) > 1):
        shown = ", ".join(f"{key}: {_shown(value)}" for key, value in found)
        raise AgentError(f"{where}: {shown} disagree; keep one of them")
    return found[0] if found else None


def _mode(meta: Mapping[str, Any], where: Path) -> tuple[Mode | None, bool]:
    found = _one_of(meta, ("mode", "permissionMode"), where)
    if found is None:
        return None, False
    key, value = found
    if not isinstance(value, str) or value not in PERMISSION_MODES:
        raise AgentError(f"{where}: {key} {_shown(value)} is not a mode; use one of {_MODES}")
    return PERMISSION_MODES[value]


def _max_steps(meta: Mapping[str, Any], where: Path) -> int | None:
    found = _one_of(meta, ("maxSteps", "max_steps", "maxTurns"), where)
    if found is None:
        return None
    key, value = found
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_STEPS:
        raise AgentError(f"{where}: {key} must be a whole number of steps from 1 to {MAX_STEPS}, not {_shown(value)}")
    return value


def _text(meta: Mapping[str, Any], key: str, where: Path, hint: str) -> str:
    value = meta.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise AgentError(f"{where}: no {key}; add '{key}: ...' to the front matter ({hint})")
    if not isinstance(value, str):
        raise AgentError(f"{where}: {key} must be text; put it in quotes")
    return value.strip()


def parse_definition(text: str, path: Path, source: Source) -> AgentDefinition | None:
    """Parse one definition file's text.

    Args:
        text: The file's contents, decoded.
        path: The file, named in messages.
        source: Where it was found.

    Returns:
        The definition, or None when its front matter says ``disabled: true`` (Claude Code's way to keep a file
        without using it).

    Raises:
        AgentError: The file is not a usable definition; the message names the file and what to fix.
    """
    split = split_front_matter(text)
    if split is None:
        raise AgentError(
            f"{path}: no front matter; start the file with a line '---', then 'name: ...' and 'description: ...', "
            "then a line '---', then the agent's instructions"
        )
    meta = _load_yaml(split[0], path)
    if meta.get("disabled") is True:
        return None
    name = meta.get("name")
    if name is None or (isinstance(name, str) and not name.strip()):
        raise AgentError(f"{path}: no name; add 'name: <agent-name>' to the front matter ({_NAME_RULE})")
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise AgentError(f"{path}: name {_shown(name)} is not valid; {_NAME_RULE}")
    description = _text(meta, "description", path, "what the agent does and when to use it")
    if len(description) > MAX_DESCRIPTION_CHARS:
        raise AgentError(
            f"{path}: the description is {len(description):,} characters; shorten it to at most "
            f"{MAX_DESCRIPTION_CHARS:,} and move details into the body"
        )
    if (ch := _control(description, format_too=True)) is not None:
        raise AgentError(f"{path}: the description holds the control character U+{ord(ch):04X}; remove it")
    prompt = split[1].strip()
    if len(prompt) > MAX_PROMPT_CHARS:
        raise AgentError(f"{path}: the instructions are {len(prompt):,} characters; at most {MAX_PROMPT_CHARS:,}")
    if (ch := _control(prompt, format_too=False)) is not None:
        raise AgentError(f"{path}: the instructions hold the control character U+{ord(ch):04X}; remove it")
    model = meta.get("model", "inherit")
    if model is None:
        model = "inherit"
    if not isinstance(model, str) or not valid_model(model):
        raise AgentError(
            f"{path}: model {_shown(model)} is not one Loom can use; use inherit, sonnet, opus, haiku, a Claude "
            "model id (claude-...), or a Loom spec such as anthropic:claude-sonnet-4-5"
        )
    mode, deny_asks = _mode(meta, path)
    notes: list[str] = []
    tools = _tools(meta, path, notes)
    denied = _denied(meta, path, notes)
    servers = meta.get("mcpServers")
    if isinstance(servers, list) and any(not isinstance(item, str) for item in servers):
        notes.append(f"{path}: mcpServers: servers defined inline were left out; a child reaches its parent's servers")
    if meta.get("hooks") is not None:
        notes.append(f"{path}: hooks were left out; Loom does not run a definition's hooks")
    return AgentDefinition(
        name=name,
        description=description,
        prompt=prompt,
        path=path,
        source=source,
        tools=tools,
        denied=denied,
        model=model,
        mode=mode,
        deny_asks=deny_asks,
        max_steps=_max_steps(meta, path),
        notes=tuple(notes),
    )
