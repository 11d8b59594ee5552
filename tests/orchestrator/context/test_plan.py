"""The model's plan survives compaction word for word: the summary's turn carries it, in the open session and in a
reopened one alike, and a later compaction carries the plan as it then stands."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from orchestrator.context.history import rebuild_history
from orchestrator.context.plan import PLAN_HEADING
from orchestrator.events import AssistantMessage, ContextCompacted, Event, UserMessage
from orchestrator.events_long import TodoItem, TodoUpdated
from orchestrator.messages import Message, TextBlock, ToolUseBlock, Usage
from orchestrator.models.base import ModelEvent, ModelRequest
from orchestrator.models.scripted import Script, ScriptedModel, ScriptedTurn
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.todo import stored_plan

pytestmark = pytest.mark.anyio

WINDOW = 20_000
PLAN = [
    {"text": "Read big.txt — twice, to be sure", "status": "completed"},
    {"text": "Count the lines ending in '7' (not \"07\")", "status": "in_progress"},
    {"text": "Report: `count=N`", "status": "pending"},
]
PLAN_BLOCK = (
    "[Your plan, as you last wrote it with loom__todo; Loom keeps it verbatim through compactions:]\n"
    "1. [x] Read big.txt — twice, to be sure\n"
    "2. [in progress] Count the lines ending in '7' (not \"07\")\n"
    "3. [ ] Report: `count=N`"
)
MARKED_BLOCK = PLAN_BLOCK.replace("2. [in progress]", "2. [x]").replace("3. [ ]", "3. [in progress]")


class Recording(ScriptedModel):
    """Keeps the opening message of each conversation request as it was sent (the live history grows later)."""

    def __init__(self, turns: list[dict[str, Any]]) -> None:
        super().__init__(Script(turns=[ScriptedTurn.model_validate(t) for t in turns], context_window=WINDOW))
        self.openings: list[str] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        if request.purpose == "turn":
            self.openings.append(request.messages[0].text)
        async for event in super().stream(request):
            yield event


def read(n: int) -> dict[str, Any]:
    return {"text": f"pass {n}", "tool_calls": [{"name": "fs__read", "arguments": {"path": "big.txt"}}]}


def todo_calls(events: list[Event]) -> int:
    return sum(1 for e in events if isinstance(e, TodoUpdated) and not e.carried)


async def test_a_compaction_carries_the_plan_verbatim_into_the_next_request_and_a_reopened_session(
    tmp_path: Path,
) -> None:
    (tmp_path / "big.txt").write_text("".join(f"line {i:04d} of the big file, quite long\n" for i in range(300)))
    marks = [{"item": 2, "status": "completed"}, {"item": 3, "status": "in_progress"}]
    model = Recording(
        [
            {"tool_calls": [{"name": "loom__todo", "arguments": {"items": PLAN}}]},
            read(1),
            read(2),
            {"text": "read it"},
            {"text": "still on it"},  # the run after the first compaction
            {"tool_calls": [{"name": "loom__todo", "arguments": {"marks": marks}}]},
            read(3),
            read(4),
            {"text": "counted"},
        ]
    )
    home = tmp_path / "home"
    async with embedded_runtime(home) as runtime, runtime.open_session(tmp_path, model) as session:
        sid = session.id
        await session.run("Count the lines of big.txt that end in 7.")
        first = await session.compact()
        await session.run("go on")
        after_first = model.openings[-1]
        kept_messages = list(session.history[1:])
        await session.run("and finish")
        second = await session.compact()
        events = await runtime.log.store.read_events(sid)
        history = list(session.history)
        record = await runtime.log.store.get_session(sid)
        assert record is not None
        from_store = await stored_plan(runtime.log.store, sid, record.last_seq)

    assert (first.status, second.status) == ("compacted", "compacted"), (first.detail, second.detail)
    # The plan's call was compacted away, yet the request after it holds the plan exactly as written.
    assert not any(isinstance(b, ToolUseBlock) and b.name == "loom__todo" for m in kept_messages for b in m.content)
    assert after_first.endswith(PLAN_BLOCK), after_first
    # The second compaction carries the plan as the marks left it, though the first write is long out of view.
    assert history[0].text.endswith(MARKED_BLOCK), history[0].text
    assert history == rebuild_history(events)
    compactions = [e for e in events if isinstance(e, ContextCompacted)]
    carried = [e for e in events if isinstance(e, TodoUpdated) and e.carried]
    assert len(compactions) == len(carried) == 2 and todo_calls(events) == 2
    assert all(
        c.seq is not None and k.seq is not None and c.seq < k.seq for c, k in zip(compactions, carried, strict=True)
    )
    assert [i.status for i in from_store] == ["completed", "completed", "in_progress"]

    again = Recording([{"text": "resumed"}])
    async with embedded_runtime(home) as runtime, runtime.open_session(tmp_path, again, session_id=sid) as reopened:
        await reopened.run("where were we?")
        plan = reopened.plan.items
    assert again.openings[0].endswith(MARKED_BLOCK)
    assert again.openings[0] == history[0].text
    assert [i.status for i in plan] == ["completed", "completed", "in_progress"]


async def test_a_session_without_a_plan_compacts_without_one(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("".join(f"line {i:04d} of the big file, quite long\n" for i in range(300)))
    model = Recording([read(1), read(2), {"text": "read it"}, {"text": "ok"}])
    async with embedded_runtime(tmp_path / "home") as runtime, runtime.open_session(tmp_path, model) as session:
        await session.run("Read big.txt twice.")
        report = await session.compact()
        await session.run("go on")
        events = await runtime.log.store.read_events(session.id)
    assert report.status == "compacted"
    assert "loom__todo" not in model.openings[-1]
    assert not [e for e in events if isinstance(e, TodoUpdated)]


def assistant(text: str) -> AssistantMessage:
    return AssistantMessage(
        session_id="s",
        run_id="r",
        step=1,
        message=Message(role="assistant", content=[TextBlock(text=text)]),
        stop_reason="end_turn",
        usage=Usage(),
        duration_ms=1.0,
    )


def numbered(events: list[Event]) -> list[Event]:
    return [e.model_copy(update={"seq": n}) for n, e in enumerate(events, 1)]


def compaction(kept_from_seq: int) -> ContextCompacted:
    return ContextCompacted(
        session_id="s",
        trigger="manual",
        summary="## Goal and constraints\nthe summariser's words",
        kept_from_seq=kept_from_seq,
        dropped_from_seq=1,
        dropped_to_seq=kept_from_seq - 1,
        dropped_messages=2,
        dropped_tool_calls=0,
        tokens_before=100,
        tokens_after=10,
    )


def test_the_summary_shows_only_the_plan_its_compaction_carried_never_a_later_or_a_cleared_one() -> None:
    written = [TodoItem(text="first step", status="in_progress")]
    start: list[Event] = [UserMessage(session_id="s", run_id="r", text="go"), assistant("working")]
    # The plan was cleared before the compaction, and a new one written after it: the summary claims neither.
    cleared = numbered(
        [
            *start,
            TodoUpdated(session_id="s", items=written),
            TodoUpdated(session_id="s", items=[]),
            assistant("kept"),
            compaction(kept_from_seq=5),
            TodoUpdated(session_id="s", items=[TodoItem(text="later")]),
        ]
    )
    carried = numbered(
        [*start, TodoUpdated(session_id="s", items=written), assistant("kept"), compaction(kept_from_seq=4)]
    )
    carried.append(TodoUpdated(session_id="s", items=written, carried=True, seq=len(carried) + 1))
    (opening, *_) = rebuild_history(cleared)
    assert "loom__todo" not in opening.text
    (opening, *_) = rebuild_history(carried)
    assert opening.text.endswith("the summariser's words" + "\n\n" + PLAN_HEADING + "\n1. [in progress] first step")
