"""What the model is told besides the conversation: the system prompt, assembled per run unless unchanged.

Layers, in order: Loom's base prompt; the instruction files (``AGENTS.md``, ``LOOM.md``) from the
user's Loom home, the project root and the working directory, later ones more specific
(:mod:`orchestrator.context.instructions`); the skills index, names and descriptions only, the body being
loaded on demand with ``loom__skill`` (:mod:`orchestrator.context.skills`); and the memory index, keys and
first lines of the notes in the user, project and session namespaces, the bodies being pulled with
``memory__get``. Indexes rather than bodies keep the prompt small however much the user has taught
Loom; the model pulls what the task needs.

The memory index is read through the hub from the session's memory server, like any other tool
call, so a memory server that is down costs the index, never the run. A session keeps its prompt while
nothing it is made of changed (:mod:`orchestrator.context.prompt_cache`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import anyio
import anyio.to_thread

from orchestrator.context.instructions import load_instructions, project_root, render_instructions
from orchestrator.context.skills import find_skills, render_skills_index
from orchestrator.hub.outcomes import ToolOutcome

BASE_PROMPT = """You are Loom, an agent that completes the user's goal by calling tools.
You work in the directory {cwd}; relative paths are resolved there and you cannot leave it.
Tool names are namespaced as server__tool (fs__read, shell__run, ...).
Work in small steps, check results before building on them, and finish with a short answer that
says what you did and where the results are."""

MEMORY_NAMESPACES = ("user", "project", "session")
MAX_INDEX_ENTRIES = 50
"""Per namespace: past this the index says how many more there are (``memory__search`` finds them)."""


class ToolCaller(Protocol):
    """What the prompt needs from the hub: call a tool by its namespaced name."""

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        """Call one tool; never raises for a tool failure."""
        ...


@dataclass(frozen=True, slots=True)
class SystemPrompt:
    """The assembled prompt, and what went wrong reading its parts (for the user, not the model)."""

    text: str
    problems: list[str] = field(default_factory=list)


def base_prompt(cwd: Path) -> str:
    """Loom's own part of the prompt, for a session working in ``cwd``."""
    return BASE_PROMPT.format(cwd=cwd)


def read_file_layers(cwd: Path, home: Path) -> tuple[str, list[str]]:
    """The instruction and skills layers of the prompt, and the problems reading them (blocking: file reads)."""
    project = project_root(cwd)
    files, problems = load_instructions(home, cwd)
    skills, skill_problems = find_skills(home, project)
    parts = [render_instructions(files), render_skills_index(skills)]
    return "\n\n".join(p for p in parts if p), problems + skill_problems


async def build_system_prompt(cwd: Path, home: Path, tools: ToolCaller | None = None) -> SystemPrompt:
    """Assemble the system prompt for a session in ``cwd`` (file reads run in a worker thread).

    Args:
        cwd: the session's working directory.
        home: Loom's home directory (user instruction files and skills).
        tools: the session's hub, for the memory index; None leaves the index out.
    """
    layered, problems = await anyio.to_thread.run_sync(read_file_layers, cwd, home)
    memory = await memory_index(tools) if tools is not None else ""
    text = "\n\n".join(p for p in (base_prompt(cwd), layered, memory) if p)
    return SystemPrompt(text, problems)


async def memory_index(tools: ToolCaller, namespaces: Sequence[str] = MEMORY_NAMESPACES) -> str:
    """The memory section of the prompt: each namespace's note keys and first lines, or "" if there are none."""
    return render_memory_index(namespaces, await list_memory(tools, namespaces))


async def list_memory(tools: ToolCaller, namespaces: Sequence[str]) -> list[ToolOutcome | None]:
    """``memory__list`` of each namespace, in order.

    The namespaces are listed concurrently, one round through the hub rather than one per namespace.
    """
    outcomes: list[ToolOutcome | None] = [None] * len(namespaces)

    async def list_one(index: int, namespace: str) -> None:
        outcomes[index] = await tools.call("memory__list", {"namespace": namespace})

    async with anyio.create_task_group() as tg:
        for index, namespace in enumerate(namespaces):
            tg.start_soon(list_one, index, namespace)
    return outcomes


def render_memory_index(namespaces: Sequence[str], outcomes: Sequence[ToolOutcome | None]) -> str:
    """The memory section made of each namespace's listing (a failed one is left out), or "" if there are no notes."""
    lines: list[str] = []
    for namespace, outcome in zip(namespaces, outcomes, strict=True):
        if outcome is None or outcome.is_error or outcome.structured is None:
            continue  # no memory server, or it failed: the run goes on without the index
        notes = outcome.structured.get("notes") or []
        for note in notes[:MAX_INDEX_ENTRIES]:
            lines.append(f"- {namespace}/{note.get('key', '?')}: {note.get('summary', '')}")
        if len(notes) > MAX_INDEX_ENTRIES:
            lines.append(f"- ({len(notes) - MAX_INDEX_ENTRIES} more {namespace} notes; memory__search finds them)")
    if not lines:
        return ""
    return (
        "## Memory\n"
        "Notes kept across sessions (user: everywhere; project: this project; session: this session). "
        "Read one with memory__get(namespace, key) when it bears on the task; save what the user teaches you "
        "with memory__set.\n" + "\n".join(lines)
    )
