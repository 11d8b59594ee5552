"""The prompt's slash commands: what they are, how a line is read as one, and what completes what is typed.

Pure logic, no widgets: :mod:`clients.tui.command_runner` carries commands out, :mod:`clients.tui.completion`
shows :func:`candidates` under the prompt. A line is a command when it starts with ``/`` and a name
(``/compact``, ``/release-notes``); ``/etc/hosts is gone`` is a message, and ``//x`` sends ``/x``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["COMMANDS", "MODES", "Candidate", "CommandSpec", "Completions", "Invocation", "candidates", "parse"]


@dataclass(frozen=True)
class CommandSpec:
    """One built-in command, as ``/help`` and the completion list show it."""

    name: str
    usage: str
    """Its arguments, as ``/help`` writes them (empty: none)."""
    summary: str


COMMANDS: tuple[CommandSpec, ...] = (
    CommandSpec("compact", "[focus] | --preview", "summarise older history now (--preview: only estimate)"),
    CommandSpec("model", "PROVIDER:NAME", "switch the session's model for its next runs"),
    CommandSpec("mode", "ask|accept-edits|plan|bypass", "change the policy mode from the next tool call"),
    CommandSpec("rewind", "", "pick a checkpoint: files back as they were before that run, in a new branch"),
    CommandSpec("resume", "", "continue the session's interrupted run"),
    CommandSpec("cancel", "", "cancel the running run"),
    CommandSpec("trace", "", "the current or last run's timeline"),
    CommandSpec("review", "[TARGET]", "a reviewer child checks the changes here: verdict and findings at file:line"),
    CommandSpec("orchestrate", "GOAL | cancel", "plan GOAL as a task graph run by child sessions, shown live"),
    CommandSpec(
        "goal", 'GOAL --accept "C" ... | cancel', "sessions work toward GOAL until a grader passes each criterion"
    ),
    CommandSpec("handoff", "[instructions]", "write a handoff and go on in a fresh session started from it"),
    CommandSpec("sessions", "", "show the sessions panel"),
    CommandSpec("servers", "", "each MCP server's state, tools, restarts, latency and last error"),
    CommandSpec("help", "", "commands and keys"),
)
"""The built-in commands, in the order ``/help`` lists them; a skill is invoked as ``/NAME`` besides these."""

MODES = ("ask", "accept-edits", "plan", "bypass")
"""Policy modes ``/mode`` offers (the face checks them, and says which exist if this list falls behind)."""

_COMMAND = re.compile(r"/([a-z0-9][a-z0-9-]*)(?:\s+(.*))?", re.DOTALL)


@dataclass(frozen=True)
class Invocation:
    """A line read as a command: ``name`` (without the slash) and the rest of the line, stripped."""

    name: str
    args: str = ""


def parse(text: str) -> Invocation | None:
    """The command ``text`` invokes, or None when it is a message (``//x`` is the message ``/x``)."""
    found = _COMMAND.fullmatch(text.strip())
    if found is None:
        return None
    return Invocation(found.group(1), (found.group(2) or "").strip())


@dataclass(frozen=True)
class Candidate:
    """One completion: what Tab puts in the prompt, and a word about it."""

    text: str
    about: str = ""


@dataclass
class Completions:
    """What the completion list offers beyond the built-in commands (refreshed from the daemon)."""

    skills: dict[str, str] = field(default_factory=dict)
    """Skill name -> its description."""
    models: list[str] = field(default_factory=list)
    providers: list[str] = field(default_factory=list)


def candidates(text: str, known: Completions, limit: int = 24) -> list[Candidate]:
    """What completes ``text`` (the prompt's whole text), best first; empty when it is not a command being typed.

    The list scrolls (it shows eight at a time), so ``limit`` leaves room for every command and a dozen skills:
    at 12 a bare ``/`` offered the commands alone once there were twelve of them.
    """
    if not text.startswith("/") or "\n" in text or text.startswith("//"):
        return []
    head, space, rest = text[1:].partition(" ")
    if not space:
        found = [Candidate(f"/{c.name}", c.summary) for c in COMMANDS if c.name.startswith(head)]
        found += [
            Candidate(f"/{name}", f"skill: {about}") for name, about in known.skills.items() if name.startswith(head)
        ]
        return found[:limit]
    if head == "mode":
        return [Candidate(f"/mode {m}") for m in MODES if m.startswith(rest) and m != rest][:limit]
    if head == "compact":
        return [Candidate("/compact --preview", "only estimate")] if "--preview".startswith(rest) and rest else []
    if head == "model":
        return _models(rest, known)[:limit]
    if head == "orchestrate" and rest and "cancel".startswith(rest) and rest != "cancel":
        return [Candidate("/orchestrate cancel", "end the session's orchestration")]
    if head == "goal" and rest and "cancel".startswith(rest) and rest != "cancel":
        return [Candidate("/goal cancel", "end the goal of the session shown")]
    return []


def _models(typed: str, known: Completions) -> list[Candidate]:
    found = [Candidate(f"/model {m}") for m in known.models if m.startswith(typed) and m != typed]
    if ":" not in typed:
        found += [Candidate(f"/model {p}:", "provider") for p in known.providers if p.startswith(typed)]
    return found
