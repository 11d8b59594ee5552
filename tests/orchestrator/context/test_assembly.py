"""The system prompt: the memory index in one concurrent round, and what changed between runs shown in the next."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from orchestrator.context.assembly import base_prompt, build_system_prompt, memory_index
from orchestrator.hub.outcomes import ToolOutcome

pytestmark = pytest.mark.anyio

MEMORY_HEADER = (
    "## Memory\n"
    "Notes kept across sessions (user: everywhere; project: this project; session: this session). "
    "Read one with memory__get(namespace, key) when it bears on the task; save what the user teaches you "
    "with memory__set.\n"
)


class FakeMemory:
    """memory__list over a dict of namespaces; the first namespace answers last, so order comes from the index."""

    def __init__(self, notes: dict[str, list[tuple[str, str]]], delays: dict[str, float] | None = None) -> None:
        self.notes = notes
        self.delays = delays or {}
        self.in_flight = 0
        self.most_in_flight = 0

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        assert name == "memory__list"
        namespace = arguments["namespace"]
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await anyio.sleep(self.delays.get(namespace, 0))
        finally:
            self.in_flight -= 1
        if namespace not in self.notes:
            return ToolOutcome("memory server failed", is_error=True)
        entries = [{"key": key, "summary": summary} for key, summary in self.notes[namespace]]
        return ToolOutcome("", structured={"namespace": namespace, "notes": entries})


async def test_the_namespaces_are_listed_in_one_round_and_the_index_keeps_their_order() -> None:
    memory = FakeMemory(
        {"user": [("style", "terse answers")], "session": [("plan", "step two next")]},
        delays={"user": 0.05, "project": 0.02},
    )
    text = await memory_index(memory)
    assert memory.most_in_flight == 3
    # Exactly what the one-namespace-at-a-time index said; the failed project listing is left out.
    assert text == MEMORY_HEADER + "- user/style: terse answers\n- session/plan: step two next"


async def test_no_notes_or_no_memory_server_leaves_the_index_out() -> None:
    assert await memory_index(FakeMemory({"user": [], "project": [], "session": []})) == ""
    assert await memory_index(FakeMemory({})) == ""


async def test_past_the_limit_the_index_says_how_many_more() -> None:
    many = [(f"k{i:03}", "x") for i in range(53)]
    text = await memory_index(FakeMemory({"project": many}))
    assert text.endswith("- project/k049: x\n- (3 more project notes; memory__search finds them)")


async def test_a_changed_instruction_file_and_a_new_note_appear_in_the_next_runs_prompt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    cwd = home / "project"
    (cwd / ".git").mkdir(parents=True)
    (cwd / "AGENTS.md").write_text("Use tabs.\n")
    memory = FakeMemory({"user": [("style", "terse answers")]})
    first = await build_system_prompt(cwd, home, memory)
    assert first.text.startswith(base_prompt(cwd))
    assert "Use tabs." in first.text and "user/style" in first.text
    (cwd / "AGENTS.md").write_text("Use spaces, never tabs.\n")
    memory.notes["session"] = [("found", "the bug is in parse()")]
    second = await build_system_prompt(cwd, home, memory)
    assert "Use spaces, never tabs." in second.text and "Use tabs." not in second.text
    assert "- session/found: the bug is in parse()" in second.text
