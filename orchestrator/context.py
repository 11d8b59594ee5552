"""What the model is told besides the conversation: the system prompt.

This is where layered instruction files, the skills index and the memory index will be assembled;
for now it states who the model is, where it works and how tools are named.
"""

from __future__ import annotations

from pathlib import Path

BASE_PROMPT = """You are Loom, an agent that completes the user's goal by calling tools.
You work in the directory {cwd}; relative paths are resolved there and you cannot leave it.
Tool names are namespaced as server__tool (fs__read, shell__run, ...).
Work in small steps, check results before building on them, and finish with a short answer that
says what you did and where the results are."""


def system_prompt(cwd: Path) -> str:
    """The system prompt for a session working in ``cwd``."""
    return BASE_PROMPT.format(cwd=cwd)
