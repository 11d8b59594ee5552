"""History rebuilt from stored events: interrupted calls, and what a compaction leaves the model to see."""

from __future__ import annotations

from typing import Any

from orchestrator.context.history import INTERRUPTED_RESULT, rebuild_context, rebuild_history, summary_text
from orchestrator.events import (
    AssistantMessage,
    ContextCompacted,
    Event,
    RunFinished,
    RunStarted,
    SessionCreated,
    ToolCallFinished,
    ToolCallStarted,
    UserMessage,
)
from orchestrator.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock, Usage

SESSION = "s1"


class Log:
    """A session's stored events, built by hand with ``seq`` numbered as the store would."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.turns = 0
        self.add(SessionCreated(session_id=SESSION, cwd="/tmp", model="scripted:test"))

    def add(self, event: Event) -> Event:
        stored = event.model_copy(update={"seq": len(self.events)})
        self.events.append(stored)
        return stored

    def user(self, text: str, run_id: str = "r") -> None:
        self.add(UserMessage(session_id=SESSION, run_id=run_id, text=text))

    def assistant(self, text: str = "", *calls: tuple[str, str, dict[str, Any]], run_id: str = "r") -> None:
        content: list[TextBlock | ToolUseBlock] = [TextBlock(text=text)] if text else []
        content += [ToolUseBlock(id=i, name=n, input=a) for i, n, a in calls]
        message = Message(role="assistant", content=list(content))
        self.add(
            AssistantMessage(
                session_id=SESSION,
                run_id=run_id,
                step=1,
                message=message,
                stop_reason="tool_use" if calls else "end_turn",
                usage=Usage(),
                duration_ms=1.0,
            )
        )

    def result(self, call_id: str, content: str, *, is_error: bool = False, run_id: str = "r") -> None:
        self.add(
            ToolCallFinished(
                session_id=SESSION,
                run_id=run_id,
                step=1,
                call_id=call_id,
                tool="fs__read",
                is_error=is_error,
                content=content,
                duration_ms=1.0,
            )
        )

    def turn(self, result_chars: int = 2000) -> None:
        """One run: an instruction, a tool call with a long result, a final answer."""
        n = self.turns
        self.turns += 1
        run_id = f"run{n}"
        self.add(RunStarted(session_id=SESSION, run_id=run_id, model="scripted:test", max_steps=10))
        self.user(f"Task {n}: read file{n}.txt and report its size.", run_id=run_id)
        call = f"call{n}"
        self.assistant(f"Reading file{n}.txt.", (call, "fs__read", {"path": f"file{n}.txt"}), run_id=run_id)
        self.add(
            ToolCallStarted(
                session_id=SESSION, run_id=run_id, step=1, call_id=call, tool="fs__read", arguments={"path": "x"}
            )
        )
        self.result(call, f"contents of file{n}: " + "x" * result_chars, run_id=run_id)
        self.assistant(f"file{n}.txt has {result_chars} characters.", run_id=run_id)
        self.add(
            RunFinished(
                session_id=SESSION, run_id=run_id, status="completed", reason="end_turn", final_text="", steps=2
            )
        )

    def compacted(self, kept_from_seq: int, summary: str = "## Goal and constraints\nsummary") -> ContextCompacted:
        event = self.add(
            ContextCompacted(
                session_id=SESSION,
                trigger="manual",
                summary=summary,
                kept_from_seq=kept_from_seq,
                dropped_from_seq=0,
                dropped_to_seq=kept_from_seq - 1,
                dropped_messages=1,
                dropped_tool_calls=0,
                tokens_before=100,
                tokens_after=10,
            )
        )
        assert isinstance(event, ContextCompacted)
        return event


def assert_well_formed(history: list[Message]) -> None:
    """Roles alternate, starting with the user, and every tool result answers a call made just before it."""
    assert history and history[0].role == "user"
    for before, after in zip(history, history[1:], strict=False):
        assert before.role != after.role, (before, after)
    for i, message in enumerate(history):
        results = [b.tool_use_id for b in message.content if isinstance(b, ToolResultBlock)]
        if results:
            assert i > 0 and [u.id for u in history[i - 1].tool_uses] == results


def assistant_seq(log: Log, nth: int) -> int:
    """The seq of the ``nth`` assistant message (negative counts from the end)."""
    seqs = [e.seq for e in log.events if isinstance(e, AssistantMessage) and e.seq is not None]
    return seqs[nth]


def test_without_compaction_an_unfinished_call_gets_an_interrupted_result() -> None:
    log = Log()
    log.user("do it")
    log.assistant("calling", ("c1", "fs__read", {"path": "a"}))
    history = rebuild_history(log.events)
    assert [m.role for m in history] == ["user", "assistant", "user"]
    block = history[2].content[0]
    assert isinstance(block, ToolResultBlock) and block.content == INTERRUPTED_RESULT and block.is_error


def test_compaction_gives_the_summary_then_the_kept_tail() -> None:
    log = Log()
    for _ in range(4):
        log.turn()
    kept_from = assistant_seq(log, 4)  # run 2's tool call
    uncompacted = rebuild_history(log.events)
    event = log.compacted(kept_from)
    log.turn()

    history = rebuild_history(log.events)

    assert history[0] == Message(role="user", content=[TextBlock(text=summary_text(event))])
    assert "compacted" in history[0].text and event.summary in history[0].text
    assert history[1].text == "Reading file2.txt."
    # The kept part is exactly what the model saw before, and the new turn follows it.
    assert history[1:8] == uncompacted[-7:]
    assert history[-1].text == "file4.txt has 2000 characters."
    assert_well_formed(history)


def test_only_the_latest_compaction_counts() -> None:
    log = Log()
    for _ in range(4):
        log.turn()
    log.compacted(assistant_seq(log, 2), summary="first summary")
    log.turn()
    second = log.compacted(assistant_seq(log, 6), summary="second summary")
    history = rebuild_history(log.events)
    assert history[0].text == summary_text(second)
    assert "first summary" not in "".join(m.text for m in history)
    assert history[1].text == "Reading file3.txt."
    assert_well_formed(history)


def test_an_empty_kept_part_merges_the_next_user_message_into_the_summary_turn() -> None:
    log = Log()
    log.turn()
    event = log.compacted(len(log.events) + 1)  # keeps nothing recorded so far
    log.user("carry on")
    log.assistant("on it")

    history = rebuild_history(log.events)

    assert [m.role for m in history] == ["user", "assistant"]
    assert history[0].content == [TextBlock(text=summary_text(event)), TextBlock(text="carry on")]


def test_open_tail_and_interrupted_calls_still_apply_after_a_compaction() -> None:
    log = Log()
    for _ in range(2):
        log.turn()
    log.compacted(assistant_seq(log, 2))
    log.user("one more")
    log.assistant("calling", ("late", "fs__read", {"path": "b"}))

    closed = rebuild_history(log.events)
    block = closed[-1].content[0]
    assert isinstance(block, ToolResultBlock) and block.tool_use_id == "late" and block.content == INTERRUPTED_RESULT

    opened = rebuild_history(log.events, open_tail=True)
    assert opened == closed[:-1] and opened[-1].tool_uses[0].id == "late"


def test_rebuild_context_locates_assistant_messages_by_seq() -> None:
    log = Log()
    for _ in range(3):
        log.turn()
    kept_from = assistant_seq(log, 2)
    log.compacted(kept_from)
    context = rebuild_context(log.events)
    assert context.summary_turns == 1
    assert context.assistant_seqs[1] == kept_from
    for index, seq in context.assistant_seqs.items():
        event = log.events[seq]
        assert isinstance(event, AssistantMessage) and context.messages[index] == event.message


def test_ten_thousand_events_rebuild_correctly() -> None:
    # How fast is measured in benchmarks/context.py (figure 11), not here: timings on shared machines are noise.
    log = Log()
    while len(log.events) < 10_000:
        log.turn(result_chars=50)
    kept_from = assistant_seq(log, -40)
    log.compacted(kept_from)
    tail = [e for e in log.events if e.seq is not None and e.seq >= kept_from and not isinstance(e, ContextCompacted)]

    history = rebuild_history(log.events)

    assert history[1:] == rebuild_history(tail)
    assert len(history) == 1 + 20 * 4 - 1  # the summary, then 20 turns of 4 messages but the first's user turn
    assert_well_formed(history)

    full = rebuild_history(log.events[:-1])
    assert len(full) > 5000
