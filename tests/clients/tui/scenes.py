"""Fixed events for the conversation, and a tiny app that shows them without a daemon.

The conversation renders only what events say, so feeding it events is the same as the daemon sending them;
fixed ids and times make the pictures of the snapshot tests the same on every run.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
from textual.app import App, ComposeResult
from textual.pilot import Pilot

from clients.tui.conversation import Conversation
from orchestrator.events import (
    ApprovalDecided,
    ApprovalRequested,
    AssistantMessage,
    ChildActivity,
    ChildFinished,
    ChildStarted,
    RunFinished,
    ToolCallFinished,
    ToolCallStarted,
    UserMessage,
)
from orchestrator.messages import Message, TextBlock, ToolUseBlock, Usage
from orchestrator.protocol import Event

SESSION = "s_00000001"
TS = 1_700_000_000.0
CSS = Path(__file__).parents[3] / "clients" / "tui" / "loom.tcss"


def assistant(run: str, step: int, text: str, *calls: ToolUseBlock) -> AssistantMessage:
    content: list[TextBlock | ToolUseBlock] = [TextBlock(text=text)] if text else []
    content.extend(calls)
    return AssistantMessage(
        session_id=SESSION,
        ts=TS,
        run_id=run,
        step=step,
        message=Message(role="assistant", content=content),
        stop_reason="tool_use" if calls else "end_turn",
        usage=Usage(input_tokens=10, output_tokens=10),
        duration_ms=5.0,
    )


def user(run: str, text: str) -> UserMessage:
    return UserMessage(session_id=SESSION, ts=TS, run_id=run, text=text)


def started(run: str, step: int, call: ToolUseBlock, ts: float = TS) -> ToolCallStarted:
    return ToolCallStarted(
        session_id=SESSION, ts=ts, run_id=run, step=step, call_id=call.id, tool=call.name, arguments=call.input
    )


def finished(run: str, step: int, call: ToolUseBlock, content: str, **extra: object) -> ToolCallFinished:
    return ToolCallFinished.model_validate(
        {
            "session_id": SESSION,
            "ts": TS,
            "run_id": run,
            "step": step,
            "call_id": call.id,
            "tool": call.name,
            "is_error": False,
            "content": content,
            "duration_ms": 12.0,
            **extra,
        }
    )


def approval(run: str, call: ToolUseBlock) -> ApprovalRequested:
    return ApprovalRequested(
        session_id=SESSION,
        ts=TS,
        run_id=run,
        approval_id=f"a_{call.id}",
        call_id=call.id,
        tool=call.name,
        arguments=call.input,
        reason="fs__edit changes files: ask mode asks first",
    )


def done(run: str) -> RunFinished:
    return RunFinished(session_id=SESSION, ts=TS, run_id=run, status="completed", reason="", final_text="", steps=1)


def child_started(
    run: str, child: str, agent: str, goal: str, ts: float = TS, depth: int = 2, child_run: str = ""
) -> ChildStarted:
    return ChildStarted(
        session_id=SESSION,
        ts=ts,
        run_id=run,
        child_session_id=child,
        child_run_id=child_run or f"r_{child}",
        agent=agent,
        goal=goal,
        depth=depth,
    )


def child_activity(run: str, child: str, step: int, tool: str) -> ChildActivity:
    return ChildActivity(
        session_id=SESSION, ts=TS, run_id=run, child_session_id=child, child_run_id=f"r_{child}", step=step, tool=tool
    )


def child_finished(
    run: str, child: str, status: str, reason: str = "", answer: str = "", steps: int = 3, child_run: str = ""
) -> ChildFinished:
    return ChildFinished.model_validate(
        {
            "session_id": SESSION,
            "ts": TS,
            "run_id": run,
            "child_session_id": child,
            "child_run_id": child_run or f"r_{child}",
            "status": status,
            "reason": reason,
            "steps": steps,
            "elapsed_s": 4.2,
            "final_text": answer,
        }
    )


def child_approval(run: str, child: str, call: ToolUseBlock) -> ApprovalRequested:
    return ApprovalRequested(
        session_id=SESSION,
        ts=TS,
        run_id=run,
        approval_id=f"a_{call.id}",
        call_id=call.id,
        tool=call.name,
        arguments=call.input,
        reason="shell__run may change anything: ask mode asks first",
        child_session_id=child,
    )


def child_decided(run: str, child: str, call: ToolUseBlock, decision: str = "approve_once") -> ApprovalDecided:
    return ApprovalDecided.model_validate(
        {
            "session_id": SESSION,
            "ts": TS,
            "run_id": run,
            "approval_id": f"a_{call.id}",
            "decision": decision,
            "decided_by": "cli",
            "child_session_id": child,
        }
    )


def long_session(turns: int) -> Iterator[Event]:
    """A session of ``turns`` runs of 4 events each: a question, a tool call and its result, the answer."""
    for i in range(turns):
        run = f"r_{i:05d}"
        call = ToolUseBlock(id=f"c_{i:05d}", name="fs__read", input={"path": f"notes/{i}.md"})
        yield user(run, f"question {i}")
        yield assistant(run, 0, "", call)
        yield finished(run, 0, call, f"line one of {i}\nline two of {i}")
        yield assistant(run, 1, f"Answer **{i}**: the notes say {i}.")


async def settle(pilot: Pilot[Any]) -> None:
    """Until the conversation's blocks are mounted, laid out and painted (bounded)."""
    conversation = pilot.app.query_one(Conversation)
    with anyio.fail_after(10):
        while conversation.batching:
            await pilot.pause(0.02)
    await pilot.pause()
    await pilot.pause()


class ConversationApp(App[None]):
    """Just the conversation, with Loom's styles, fed ``events`` once it is mounted."""

    CSS_PATH = str(CSS)

    def __init__(self, events: list[Event], *, theme: str | None = None) -> None:
        super().__init__()
        self.events = events
        if theme:
            self.theme = theme

    def compose(self) -> ComposeResult:
        yield Conversation()

    @property
    def conversation(self) -> Conversation:
        return self.query_one(Conversation)

    def on_mount(self) -> None:
        for event in self.events:
            self.conversation.show(event)
