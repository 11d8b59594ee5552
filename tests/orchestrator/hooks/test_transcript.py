"""The transcript a hook reads (Claude Code's JSONL shape), and that no tool can read it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.events import ToolCallFinished
from tests.orchestrator.hooks.support import call, handler, opened, script, turns, write_hooks

pytestmark = pytest.mark.anyio

# As Claude Code hooks do: read the transcript, find the last assistant text, refuse to stop until tests ran.
NEEDS_TESTS = """
import json, sys
data = json.load(sys.stdin)
lines = [json.loads(line) for line in open(data["transcript_path"], encoding="utf-8")]
said = [b["text"] for line in lines if line["type"] == "assistant"
        for b in line["message"]["content"] if b["type"] == "text"]
if not data["stop_hook_active"] and not any("tests pass" in text for text in said):
    print(json.dumps({"decision": "block", "reason": "run the tests first"}))
"""


async def test_a_stop_hook_reads_the_conversation_from_transcript_path(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    write_hooks(home / "hooks.json", {"Stop": [{"hooks": [handler(script(tmp_path, "t", NEEDS_TESTS))]}]})
    model = turns({"text": "Done, I think."}, {"text": "Ran them: tests pass."})
    async with opened(home, work, model) as (_, session):
        result = await session.run("fix it")
        transcript = home / "transcripts" / f"{session.id}.jsonl"
        lines = [json.loads(line) for line in transcript.read_text(encoding="utf-8").splitlines()]
    assert (result.status, result.final_text, result.steps) == ("completed", "Ran them: tests pass.", 2)
    assert [line["type"] for line in lines] == ["user", "assistant", "user", "assistant"]
    assert lines[0]["message"]["content"] == [{"type": "text", "text": "fix it"}]
    assert transcript.stat().st_mode & 0o077 == 0


async def test_the_file_tools_never_read_the_transcripts_even_with_the_home_inside_the_workspace(
    tmp_path: Path,
) -> None:
    # The shell is kept out of Loom's home by its sandbox (as it is kept from the databases); the file tools by name.
    work = tmp_path / "work"
    home = work / "state"
    work.mkdir()
    write_hooks(home / "hooks.json", {"Stop": [{"hooks": [handler("true")]}]})
    async with opened(home, work, turns({"text": "first"})) as (_, session):
        await session.run("a secret plan")
        first = session.id
    assert (home / "transcripts" / f"{first}.jsonl").exists()
    model = turns(
        {
            "tool_calls": [
                call("fs__read", path=f"state/transcripts/{first}.jsonl"),
                call("fs__grep", pattern="secret plan", path="."),
                call("fs__glob", pattern="**/*.jsonl"),
            ]
        },
        {"text": "ok"},
    )
    async with opened(home, work, model) as (runtime, session):
        await session.run("snoop")
        events = await runtime.log.store.read_events(session.id)
    found = {e.tool: e for e in events if isinstance(e, ToolCallFinished)}
    assert found["fs__read"].is_error and "Loom's own state" in found["fs__read"].content
    assert "transcripts" not in found["fs__grep"].content and "secret plan" not in found["fs__grep"].content
    assert "transcripts" not in found["fs__glob"].content
