"""``/help``: the commands, the skills that can be invoked by name, and the keys."""

from __future__ import annotations

from collections.abc import Sequence

from clients.tui.commands import COMMANDS

__all__ = ["KEYS", "help_text"]

KEYS: tuple[tuple[str, str], ...] = (
    ("Enter / Ctrl+J", "send / new line"),
    ("Up / Down", "earlier / later messages (on the first / last line)"),
    ("Tab", "complete a command (with the list open); else move between panes"),
    ("Ctrl+C", "cancel the running run; twice quits"),
    ("Ctrl+Q", "quit (the daemon's runs go on)"),
    ("Ctrl+N / Ctrl+O", "new session / sessions panel"),
    ("a / s / d", "on an approval card: approve once, for the session, deny"),
    ("r / k / x", "on a review card: run the call again, skip it with a note, stop the run"),
    ("Enter / Ctrl+B", "on a child's block: open the child / in a child: back to its parent"),
    ("Space", "in the sessions panel: close or open a session's children"),
)
"""The keys ``/help`` lists (docs/tui.md has them all)."""


def help_text(skills: Sequence[str] = ()) -> str:
    """What ``/help`` shows: one line per command, the skills, then the keys."""
    width = max(len(c.name) + len(c.usage) for c in COMMANDS) + 3
    lines = ["commands:"]
    lines += [f"  /{c.name} {c.usage}".ljust(width + 2) + f"  {c.summary}" for c in COMMANDS]
    if skills:
        lines.append("  /SKILL [what for]".ljust(width + 2) + "  ask the model to use a skill: " + ", ".join(skills))
    lines.append("keys:")
    key_width = max(len(k) for k, _ in KEYS)
    lines += [f"  {k.ljust(key_width)}  {what}" for k, what in KEYS]
    return "\n".join(lines)
