"""Reading hooks files: ``$LOOM_HOME/hooks.json`` and a trusted project's ``.loom/hooks.json``.

The shape is Claude Code's (and Codex's)::

    {"hooks": {"PreToolUse": [{"matcher": "Bash",
                               "hooks": [{"type": "command", "command": "~/bin/check.py", "timeout": 60}]}]}}

A Claude Code ``settings.json`` can be used as it is: its other top-level keys (``permissions``, ``env``...) are
ignored. Loom adds one key per handler, ``"onError": "block" | "allow"`` (default ``block``): what happens when the
hook crashes, times out or prints malformed output. A project's file runs only once the project is trusted
(:mod:`orchestrator.trust` hashes it with the project's other config files); otherwise it is left out with a
sentence saying so, as an untrusted project's servers are.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from orchestrator.config import ConfigError

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "EVENTS",
    "HookEvent",
    "HookHandler",
    "HooksConfig",
    "load_hooks",
    "parse_hooks",
]

HookEvent = Literal[
    "PreToolUse",
    "PostToolUse",
    "PermissionRequest",
    "UserPromptSubmit",
    "Stop",
    "SubagentStop",
    "PreCompact",
    "SessionStart",
    "SessionEnd",
]
EVENTS: tuple[HookEvent, ...] = get_args(HookEvent)
DEFAULT_TIMEOUT_S = 60.0
"""Seconds a handler may run before it is killed with its process group (Claude Code's default too)."""
MAX_TIMEOUT_S = 3600.0
_HANDLER_KEYS = {"type", "command", "timeout", "onError"}
OnError = Literal["block", "allow"]


@dataclass(frozen=True, slots=True)
class HookHandler:
    """One configured command for one event."""

    event: HookEvent
    matcher: str
    """As configured: empty or ``*`` matches everything, anything else is a regular expression matched in full."""
    command: str
    timeout_s: float
    on_error: OnError
    source: str
    """The file it came from."""
    pattern: re.Pattern[str] | None
    """The compiled matcher; None matches everything."""

    def matches(self, names: tuple[str, ...]) -> bool:
        """Whether the matcher accepts any of ``names`` (a tool's Loom, Claude and ``mcp__`` names, or a trigger)."""
        return self.pattern is None or any(self.pattern.fullmatch(name) for name in names)


@dataclass(frozen=True, slots=True)
class HooksConfig:
    """Every handler of the files read, in file order (the user's first)."""

    handlers: tuple[HookHandler, ...] = ()

    def of(self, event: HookEvent) -> tuple[HookHandler, ...]:
        """The handlers of ``event``."""
        return tuple(h for h in self.handlers if h.event == event)

    def __bool__(self) -> bool:
        return bool(self.handlers)


def parse_hooks(text: str, source: str) -> HooksConfig:
    """Validate the text of a hooks file (``source`` names it in errors).

    Raises:
        ConfigError: invalid JSON, an unknown event, or a group or handler of the wrong shape.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{source}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a JSON object with a 'hooks' key")
    raw = data.get("hooks", {})
    if not isinstance(raw, dict):
        raise ConfigError(
            f'{source}: hooks must be an object like {{"PreToolUse": [{{"matcher": "Bash", "hooks": []}}]}}'
        )
    handlers: list[HookHandler] = []
    for event, groups in raw.items():
        if event not in EVENTS:
            raise ConfigError(f"{source}: hooks.{event}: unknown event; the events are {', '.join(EVENTS)}")
        if not isinstance(groups, list):
            raise ConfigError(f"{source}: hooks.{event} must be a list of matcher groups")
        for i, group in enumerate(groups):
            handlers.extend(_group(event, group, f"{source}: hooks.{event}[{i}]", source))
    return HooksConfig(tuple(handlers))


def _group(event: HookEvent, group: object, where: str, source: str) -> list[HookHandler]:
    if not isinstance(group, dict):
        raise ConfigError(f'{where} must be an object like {{"matcher": "Bash", "hooks": [...]}}')
    unknown = sorted(set(group) - {"matcher", "hooks"})
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}; the keys are 'matcher' and 'hooks'")
    matcher = group.get("matcher", "")
    if not isinstance(matcher, str):
        raise ConfigError(f"{where}.matcher must be a string (a tool name or a regular expression)")
    pattern: re.Pattern[str] | None = None
    if matcher not in ("", "*"):
        try:
            pattern = re.compile(matcher)
        except re.error as exc:
            raise ConfigError(f"{where}.matcher: {matcher!r} is not a valid regular expression: {exc}") from None
    entries = group.get("hooks", [])
    if not isinstance(entries, list):
        raise ConfigError(f"{where}.hooks must be a list of handlers")
    found: list[HookHandler] = []
    for j, entry in enumerate(entries):
        here = f"{where}.hooks[{j}]"
        if not isinstance(entry, dict):
            raise ConfigError(f'{here} must be an object like {{"type": "command", "command": "..."}}')
        extra = sorted(set(entry) - _HANDLER_KEYS)
        if extra:
            raise ConfigError(f"{here}: unknown key {extra[0]!r}; the keys are {', '.join(sorted(_HANDLER_KEYS))}")
        kind = entry.get("type", "command")
        if kind != "command":
            raise ConfigError(f"{here}.type: {kind!r} is not supported; Loom runs handlers of type 'command'")
        command = entry.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ConfigError(f"{here}.command must be a non-empty string (a shell command line)")
        timeout = entry.get("timeout", DEFAULT_TIMEOUT_S)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= MAX_TIMEOUT_S:
            raise ConfigError(f"{here}.timeout must be a number of seconds between 0 and {MAX_TIMEOUT_S:g}")
        on_error = entry.get("onError", "block")
        if on_error not in ("block", "allow"):
            raise ConfigError(f"{here}.onError must be 'block' (the default) or 'allow', not {on_error!r}")
        found.append(HookHandler(event, matcher, command, float(timeout), on_error, source, pattern))
    return found


def load_hooks(home: Path, project: Path) -> tuple[HooksConfig, list[str]]:
    """The user's hooks, then the project's when it is trusted.

    Blocking (it reads files): call it from a worker thread.

    Returns:
        The handlers, and a sentence for each file left out (the project's, while it is not trusted).

    Raises:
        ConfigError: a hooks file is unreadable or invalid (the message names the file and key).
    """
    from orchestrator.trust import read_project, trust_state

    handlers: list[HookHandler] = []
    user = home / "hooks.json"
    try:
        text = user.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{user}: cannot read: {exc}") from exc
    if text is not None:
        handlers.extend(parse_hooks(text, str(user)).handlers)
    snapshot = read_project(project)
    ignored: list[str] = []
    if snapshot.hooks is not None:
        path = snapshot.hooks_path
        try:
            found = parse_hooks(snapshot.hooks.decode("utf-8"), str(path))
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{path}: cannot read: not UTF-8 text ({exc.reason})") from exc
        state = trust_state(home, project, snapshot.digest)
        if state == "trusted":
            handlers.extend(found.handlers)
        elif found:
            why = "it changed since you trusted it" if state == "changed" else "the project is not trusted"
            commands = "; ".join(sorted({h.command[:80] for h in found.handlers}))
            ignored.append(
                f"{path}: ignoring its {len(found.handlers)} hook(s) ({commands}): {why}; review them and run "
                f"`loom trust` in {project} to use them"
            )
    return HooksConfig(tuple(handlers)), ignored
