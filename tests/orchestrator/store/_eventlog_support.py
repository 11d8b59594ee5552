"""What the event log's tests share: a real store that counts its reads, and a run's events as the loop writes them."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from orchestrator.events import (
    AssistantMessage,
    ContextWatermark,
    Event,
    RunFinished,
    RunStarted,
    ToolCallFinished,
    ToolCallStarted,
    UserMessage,
)
from orchestrator.messages import Message, TextBlock, ToolUseBlock, Usage
from orchestrator.store.checkpoints import CheckpointStore


class CountingStore(CheckpointStore):
    """The real checkpoint store, counting ``read_events`` calls per session (how often a reader asked it)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.reads: Counter[str] = Counter()

    async def read_events(
        self,
        session_id: str,
        *,
        after_seq: int = 0,
        run_id: str | None = None,
        limit: int | None = None,
        before_seq: int | None = None,
    ) -> list[Event]:
        """Count the call, then read as the real store does."""
        self.reads[session_id] += 1
        return await super().read_events(
            session_id, after_seq=after_seq, run_id=run_id, limit=limit, before_seq=before_seq
        )


def run_start(session_id: str, run_id: str) -> list[Event]:
    """The batch a run opens with."""
    return [
        RunStarted(session_id=session_id, run_id=run_id, model="scripted:x", max_steps=50),
        UserMessage(session_id=session_id, run_id=run_id, text='Keep going: ünïcode, "quotes" and \\ too.'),
    ]


def step(session_id: str, run_id: str, n: int) -> list[list[Event]]:
    """One tool step as the loop stores it: message + watermark + call start, then the result."""
    call_id = f"toolu_{n:04d}"
    message = Message(
        role="assistant",
        content=[TextBlock(text=f"Step {n}."), ToolUseBlock(id=call_id, name="fs__read", input={"path": f"f{n}"})],
    )
    return [
        [
            AssistantMessage(
                session_id=session_id,
                run_id=run_id,
                step=n,
                message=message,
                stop_reason="tool_use",
                usage=Usage(input_tokens=10 * n, output_tokens=3),
                duration_ms=1.5,
            ),
            ContextWatermark(
                session_id=session_id,
                run_id=run_id,
                step=n,
                model="scripted:x",
                used_tokens=10 * n,
                window=200_000,
                ratio=n / 20_000,
                threshold=0.8,
                source="provider",
            ),
            ToolCallStarted(
                session_id=session_id, run_id=run_id, step=n, call_id=call_id, tool="fs__read", arguments={"path": "f"}
            ),
        ],
        [
            ToolCallFinished(
                session_id=session_id,
                run_id=run_id,
                step=n,
                call_id=call_id,
                tool="fs__read",
                is_error=n % 5 == 0,
                content=f"line {n}\n" * (n % 7),
                duration_ms=0.25,
            )
        ],
    ]


def run_end(session_id: str, run_id: str, steps: int) -> list[Event]:
    """The batch a run ends with."""
    finished = RunFinished(
        session_id=session_id, run_id=run_id, status="completed", reason="end_turn", final_text="done", steps=steps
    )
    return [finished]
