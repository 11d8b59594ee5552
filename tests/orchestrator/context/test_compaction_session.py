"""A scripted session long enough to cross the compaction threshold twice, end to end through the runtime.

Real parts throughout: the checkpoints store on SQLite, the fs server reading a real file, the loop's
threshold check before every model call, the scripted model answering both the conversation and the
compaction requests (it writes its summaries from the request, quoting the instructions it is given).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from orchestrator.config import LoomConfig, LoopSettings
from orchestrator.context.history import rebuild_history
from orchestrator.context.tokens import estimate_request
from orchestrator.events import CompactionFailed, ContextCompacted, ContextWatermark, Notice, ToolCallFinished
from orchestrator.messages import Message
from orchestrator.models.base import ModelEvent, ModelRequest
from orchestrator.models.scripted import Script, ScriptedModel
from orchestrator.runtime.embedded import embedded_runtime

pytestmark = pytest.mark.anyio

READS_ON_PURPOSE = LoomConfig(loop=LoopSettings(enabled=False))
"""The session reads the same file again and again to fill its context: a loop, on purpose."""
INSTRUCTION = "Read big.txt again and again. Never write to any file; answer in one line."
LINE = "the quick brown fox jumps over the lazy dog, line {:03d}\n"


def reading_turns(n: int) -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = [
        {"text": f"Reading, pass {i}.", "tool_calls": [{"name": "fs__read", "arguments": {"path": "big.txt"}}]}
        for i in range(n)
    ]
    return [*turns, {"text": "Read it every time; it has 70 lines."}]


def cost(request: ModelRequest) -> int:
    return estimate_request(request.system, request.messages, request.tools)


class RecordingModel(ScriptedModel):
    """Notes each request as it was when sent (the loop's history list keeps growing afterwards)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sent: list[tuple[str, int, Message]] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.sent.append((request.purpose, cost(request), request.messages[0]))
        async for event in super().stream(request):
            yield event


async def test_a_long_session_compacts_twice_and_still_completes(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("".join(LINE.format(i) for i in range(70)))  # ~3,900 chars, ~1,000 tokens
    model = RecordingModel(Script(turns=reading_turns(14), context_window=8000))
    async with (
        embedded_runtime(tmp_path / "home", config=READS_ON_PURPOSE) as runtime,
        runtime.open_session(tmp_path, model) as session,
    ):
        result = await session.run(INSTRUCTION)
        events = await runtime.log.store.read_events(session.id)
        history_after = list(session.history)

    assert (result.status, result.final_text) == ("completed", "Read it every time; it has 70 lines.")
    compactions = [e for e in events if isinstance(e, ContextCompacted)]
    assert len(compactions) >= 2 and {c.trigger for c in compactions} == {"auto"}
    for c in compactions:
        assert c.tokens_after < c.tokens_before and c.dropped_tool_calls > 0
        assert INSTRUCTION in c.summary and INSTRUCTION in c.instructions

    # Around each compaction, the next conversation request is smaller and opens with the summary.
    kinds = [purpose for purpose, _, _ in model.sent]
    assert kinds.count("summary") == len(compactions)
    for i, (purpose, _, _) in enumerate(model.sent):
        if purpose != "summary":
            continue
        (_, before, _), (next_purpose, after, opening) = model.sent[i - 1], model.sent[i + 1]
        assert next_purpose == "turn" and after < before
        assert opening.role == "user" and "compacted" in opening.text and INSTRUCTION in opening.text
    assert all(tokens <= 8000 for purpose, tokens, _ in model.sent if purpose == "turn")

    # Watermarks follow every model call; the one after a compaction reports the smaller context.
    marks = [e for e in events if isinstance(e, ContextWatermark)]
    assert len(marks) >= 15 + len(compactions)
    assert all(m.window == 8000 and m.threshold == 0.8 for m in marks)

    # The raw history is all still in the store, and rebuilding from it gives what the session holds.
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert len(finished) == 14 and all(e.content.count("lazy dog") == 70 for e in finished)
    assert rebuild_history(events) == history_after


async def test_a_summary_that_fails_its_checks_twice_keeps_the_history_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("".join(LINE.format(i) for i in range(70)))
    bad = [
        {"text": "## Goal and constraints\nread files\n\n## Next step\nmore"},  # sections and instruction missing
        {"text": "## Goal and constraints\nstill no instruction and no other sections"},
    ]
    model = RecordingModel(Script(turns=reading_turns(6), context_window=8000, summaries=bad))
    async with (
        embedded_runtime(tmp_path / "home", config=READS_ON_PURPOSE) as runtime,
        runtime.open_session(tmp_path, model) as session,
    ):
        result = await session.run(INSTRUCTION)
        events = await runtime.log.store.read_events(session.id)

    assert result.status == "completed"
    assert not [e for e in events if isinstance(e, ContextCompacted)]
    (failed,) = [e for e in events if isinstance(e, CompactionFailed)]
    assert failed.attempts == 2 and "missing sections" in failed.reason and "kept as it is" in failed.reason
    warnings = [e.text for e in events if isinstance(e, Notice) and e.level == "warning"]
    assert any(w.startswith("compaction failed:") for w in warnings)
    # Tried twice (the retry states the problem), then not again in this run; the history stayed whole.
    assert [purpose for purpose, _, _ in model.sent].count("summary") == 2
    last_turn = [opening for purpose, _, opening in model.sent if purpose == "turn"][-1]
    assert last_turn.text == INSTRUCTION
