"""Loom's own tools in a real session: a cut tool result is fetched whole from the store, skills load on demand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator.events import ToolCallFinished
from orchestrator.messages import ToolResultBlock
from orchestrator.models.scripted import ScriptedModel
from orchestrator.runtime.embedded import embedded_runtime

pytestmark = pytest.mark.anyio


def big_log() -> str:
    lines = [f"step {i:05d}: compiled module_{i}.c" for i in range(2400)]
    lines[1200] = "module_1200.c:12: error: expected ';' before '}' token"
    return "\n".join(lines) + "\n"


async def test_a_long_result_is_cut_for_the_model_and_fetched_whole_from_the_store(tmp_path: Path) -> None:
    log = big_log()
    (tmp_path / "build.log").write_text(log)
    first = "toolu_0000_0"  # the scripted model's wire id for the first turn's first call
    model = ScriptedModel.from_turns(
        [
            {"tool_calls": [{"name": "fs__read", "arguments": {"path": "build.log"}}]},
            {"tool_calls": [{"name": "loom__tool_output", "arguments": {"call_id": first, "limit": 50_000}}]},
            {
                "tool_calls": [
                    {"name": "loom__tool_output", "arguments": {"call_id": first, "offset": 50_000, "limit": 50_000}}
                ]
            },
            {"tool_calls": [{"name": "loom__tool_output", "arguments": {"call_id": "toolu_nope"}}]},
            {"text": "The build failed at module_1200.c."},
        ]
    )
    async with embedded_runtime(tmp_path / "home") as runtime, runtime.open_session(tmp_path, model) as session:
        result = await session.run("why did the build fail?")
        events = await runtime.log.store.read_events(session.id)
    assert result.status == "completed"

    seen = [b for m in model.requests[-1].messages for b in m.content if isinstance(b, ToolResultBlock)]
    cut = seen[0].content
    assert len(cut) < 17_000 < len(log)
    assert "step 00000" in cut and "step 02399" in cut  # head and tail
    assert "module_1200.c:12: error: expected ';'" in cut  # the error line from the omitted middle
    assert f'loom__tool_output with call_id="{first}"' in cut

    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    stored = finished[0].content
    assert log in stored  # the store keeps the output whole (after fs__read's header line)
    pages = [json.loads(e.content) for e in finished[1:3]]
    assert pages[0]["total_chars"] == len(stored) and pages[0]["next_offset"] == 50_000
    assert pages[0]["text"] + pages[1]["text"] == stored and pages[1]["next_offset"] is None
    assert finished[3].is_error and "no finished tool call 'toolu_nope' in this session" in finished[3].content


def write_skill(root: Path, name: str, front: str, body: str = "Do it well.") -> None:
    (root / name).mkdir(parents=True)
    (root / name / "SKILL.md").write_text(f"---\n{front}\n---\n{body}\n")
    (root / name / "template.txt").write_text("x")


async def test_skills_are_indexed_in_the_prompt_and_loaded_on_demand(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    write_skill(home / "skills", "deploy", "name: deploy\ndescription: Ship it to staging", "Run make deploy.")
    write_skill(project / ".loom" / "skills", "broken", "name: Broken Name\ndescription: x")
    calls: list[dict[str, Any]] = [
        {"name": "loom__skill", "arguments": {"name": "deploy"}},
        {"name": "loom__skill", "arguments": {"name": "missing"}},
        {"name": "loom__skill", "arguments": {"name": "deploy", "file": "template.txt"}},
        {"name": "loom__skill", "arguments": {"name": "deploy", "file": "../../../etc/passwd"}},
    ]
    model = ScriptedModel.from_turns([{"tool_calls": calls}, {"text": "done"}])
    async with embedded_runtime(home) as runtime, runtime.open_session(project, model) as session:
        await session.run("deploy")
        events = await runtime.log.store.read_events(session.id)
    system = model.requests[0].system
    assert "- deploy: Ship it to staging" in system and "Run make deploy." not in system
    by_call = {e.call_id: e for e in events if isinstance(e, ToolCallFinished)}
    loaded, missing = by_call["toolu_0000_0"], by_call["toolu_0000_1"]
    assert "Run make deploy." in loaded.content and "template.txt" in loaded.content
    assert missing.is_error and "no skill named 'missing'; the skills are: deploy" in missing.content
    assert json.loads(by_call["toolu_0000_2"].content)["text"] == "x"
    escape = by_call["toolu_0000_3"]
    assert escape.is_error and "is not inside skill 'deploy'" in escape.content
    warnings = [e.text for e in events if e.type == "notice" and e.level == "warning"]
    assert any("broken" in w and "SKILL.md" in w for w in warnings), warnings
