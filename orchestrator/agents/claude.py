"""Claude Code's names in agent definitions, and what they are in Loom.

Definitions written for Claude Code (``.claude/agents/*.md``) name its built-in tools (``Read``, ``Bash``), its
MCP tools (``mcp__github__create_issue``), its permission modes (``acceptEdits``) and its model aliases
(``sonnet``). Loom reads them unchanged by mapping each name where Loom has a well-defined equivalent, and by
saying (a note on the definition) what it left out otherwise. Leaving a tool out only narrows what the child may
do, which is the safe direction; nothing here ever maps a name to more than it meant.
"""

from __future__ import annotations

import re

from orchestrator.policy import Mode

__all__ = ["MODEL_ALIASES", "PERMISSION_MODES", "loom_tool", "model_spec", "valid_model"]

# Claude Code's built-in tools with a Loom tool that does the same thing (compared case-insensitively).
_TOOLS = {
    "read": "fs__read",
    "write": "fs__write",
    "edit": "fs__edit",
    "multiedit": "fs__edit",
    "glob": "fs__glob",
    "grep": "fs__grep",
    "ls": "fs__list",
    "bash": "shell__run",
    "skill": "loom__skill",
    # Spawning agents; a child's children are narrowed like any other child.
    "agent": "subagents__*",
    "task": "subagents__*",
}
# A namespaced Loom name or glob: what the hub's names are made of, plus the glob characters.
_LOOM_GLOB = re.compile(r"[A-Za-z0-9_*?-]{1,128}")
_MCP_TOOL = re.compile(r"mcp__([A-Za-z0-9_-]+?)(?:__([A-Za-z0-9_*?-]+))?")

PERMISSION_MODES: dict[str, tuple[Mode, bool]] = {
    "ask": ("ask", False),
    "accept-edits": ("accept-edits", False),
    "plan": ("plan", False),
    "bypass": ("bypass", False),
    "default": ("ask", False),
    "acceptEdits": ("accept-edits", False),
    "bypassPermissions": ("bypass", False),
    # Claude Code's dontAsk denies what is not pre-approved instead of asking: Loom's headless behaviour.
    "dontAsk": ("ask", True),
}
"""Loom's modes and Claude Code's ``permissionMode`` values: the Loom mode, and whether asks become denials."""

MODEL_ALIASES = ("sonnet", "opus", "haiku")
"""Claude Code's model aliases: a tier of Anthropic model, whose version Claude Code picks and Loom does not."""
_PROVIDERS = ("anthropic", "openai", "scripted")
_CLAUDE_ID = re.compile(r"claude-[a-z0-9][a-z0-9.-]{0,80}")
_SPEC = re.compile(r"[a-z]+:[A-Za-z0-9._/@:-]{1,200}")


def loom_tool(entry: str) -> tuple[str | None, str]:
    """The Loom tool glob a ``tools`` entry names, or None and why it has none.

    Args:
        entry: One entry of a definition's ``tools`` or ``disallowedTools``: a Claude Code name (``Read``,
            ``mcp__github__create_issue``, ``mcp__github``) or a Loom name or glob (``fs__read``, ``fs__*``).

    Returns:
        ``(glob, "")``, or ``(None, reason)`` for an entry Loom cannot map.
    """
    folded = entry.casefold()
    if folded in _TOOLS:
        return _TOOLS[folded], ""
    mcp = _MCP_TOOL.fullmatch(entry)
    if mcp is not None:
        server, tool = mcp.groups()
        return f"{server}__{tool or '*'}", ""
    if "(" in entry:
        head = entry.partition("(")[0].strip()
        return None, (
            f"{entry!r}: an argument pattern in tools cannot be kept (Loom's allow-lists name whole tools); "
            f"{head} was left out; allow it in tools without a pattern, and narrow it with a rule in "
            ".loom/policy.toml"
        )
    if "__" in entry and _LOOM_GLOB.fullmatch(entry):
        return entry, ""
    if entry == "*":
        return "*", ""
    return None, f"{entry!r} has no equivalent among Loom's tools and was left out"


def valid_model(model: str) -> bool:
    """Whether a definition's ``model`` is one Loom can use: ``inherit``, an alias, a Claude model id or a spec."""
    if model == "inherit" or model in MODEL_ALIASES or _CLAUDE_ID.fullmatch(model):
        return True
    return _SPEC.fullmatch(model) is not None and model.partition(":")[0] in _PROVIDERS


def model_spec(model: str, parent: str) -> tuple[str, str]:
    """The Loom model spec a child with a definition's ``model`` runs on.

    Args:
        model: The definition's ``model`` (valid per :func:`valid_model`).
        parent: The parent session's model spec (``anthropic:claude-opus-4-5``, ``scripted:demo``).

    Returns:
        ``(spec, note)``: the note, when not empty, says why the child runs on its parent's model instead of
        the one named. An alias is well-defined only on Anthropic: ``sonnet`` is Loom's default Anthropic model,
        and an alias of the parent's own tier is the parent's model; otherwise the child inherits.
    """
    if model == "inherit":
        return parent, ""
    if _CLAUDE_ID.fullmatch(model):
        return f"anthropic:{model}", ""
    if model not in MODEL_ALIASES:
        return model, ""
    provider, _, name = parent.partition(":")
    if provider == "anthropic":
        if name.startswith(f"claude-{model}-"):
            return parent, ""
        if model == "sonnet":
            # Imported here: orchestrator.models loads pydantic, which reading definitions does not need.
            from orchestrator.models import DEFAULT_ANTHROPIC_MODEL

            return DEFAULT_ANTHROPIC_MODEL, ""
    return parent, (
        f"model {model!r} is a Claude Code alias with no fixed Loom model when the parent runs {parent}; "
        "the child uses its parent's model (name a spec such as anthropic:claude-opus-4-5 to choose one)"
    )
