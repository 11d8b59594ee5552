"""The conversation of one session, rendered from its events: history first, then live.

Every block is made from events the daemon sent (stored ones, and the live ``text_delta`` /
``tool_call_delta`` that :class:`clients.loom.LiveFollower` makes): the TUI holds no state the daemon does
not have, so a second TUI on the same session shows the same thing. The view stays at the bottom as blocks
come (``anchor``) until the user scrolls up, and follows again once they scroll back down.
"""

from __future__ import annotations

from typing import Any

from textual import events, on
from textual.containers import VerticalScroll
from textual.widget import Widget

from clients.tui.approval_card import ApprovalCard
from clients.tui.assistant_text import AssistantText
from clients.tui.notice_line import NoticeLine
from clients.tui.tool_block import ToolBlock
from clients.tui.user_message import UserMessageBlock
from orchestrator.events import (
    ApprovalDecided,
    ApprovalRequested,
    AssistantMessage,
    CompactionFailed,
    ContextCompacted,
    ModelRetry,
    ModelSwitched,
    Notice,
    RunFinished,
    RunQueued,
    RunResumed,
    ServerFailed,
    TextDelta,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallStarted,
    UserMessage,
)
from orchestrator.messages import ToolUseBlock
from orchestrator.protocol import Event

__all__ = ["Conversation"]


class Conversation(VerticalScroll, can_focus=True):
    """The blocks of one session: user messages, assistant text, tool calls, approval cards, notices."""

    def __init__(self) -> None:
        super().__init__()
        self._texts: dict[tuple[str, int], AssistantText] = {}
        self._tools: dict[str, ToolBlock] = {}
        """call_id -> its block."""
        self._streaming_tools: dict[tuple[str, int, int], ToolBlock] = {}
        """(run, step, index) -> the block of a call whose arguments are streaming."""
        self._cards: dict[str, ApprovalCard] = {}
        self._queued: dict[str, UserMessageBlock] = {}

    @on(events.Mount)
    def _mounted(self) -> None:
        self.anchor()

    # -- what the app and the tests read ------------------------------------------------------------

    @property
    def texts(self) -> list[AssistantText]:
        """The assistant's text blocks, in order."""
        return list(self._texts.values())

    def tool(self, call_id: str) -> ToolBlock | None:
        """The block of a tool call."""
        return self._tools.get(call_id)

    def card(self, approval_id: str) -> ApprovalCard | None:
        """The card of an approval."""
        return self._cards.get(approval_id)

    def pending_cards(self) -> list[ApprovalCard]:
        """Cards still waiting for a decision, oldest first."""
        return [c for c in self._cards.values() if c.pending]

    def clear(self) -> None:
        """Forget everything shown (another session is about to be shown)."""
        self._texts.clear()
        self._tools.clear()
        self._streaming_tools.clear()
        self._cards.clear()
        self._queued.clear()
        self.remove_children()

    # -- events -------------------------------------------------------------------------------------

    def show(self, event: Event) -> None:
        """Render one event (those that change nothing visible are skipped)."""
        if isinstance(event, TextDelta):
            self._text(event.run_id, event.step).feed(event.text)
        elif isinstance(event, ToolCallDelta):
            self._tool_delta(event)
        elif isinstance(event, AssistantMessage):
            self._assistant(event)
        elif isinstance(event, UserMessage):
            queued = self._queued.pop(event.run_id, None)
            if queued is not None:
                queued.remove()
            self._add(UserMessageBlock(event.text, run_id=event.run_id))
        elif isinstance(event, RunQueued):
            block = UserMessageBlock(event.text, run_id=event.run_id, queued=True)
            self._queued[event.run_id] = block
            self.mount(block)  # queued messages stay below everything else until their run starts
        elif isinstance(event, ToolCallStarted):
            self._call(event.call_id, event.tool, event.arguments).set_status("running", started=event.ts)
        elif isinstance(event, ToolCallFinished):
            self._call(event.call_id, event.tool, {}).finished(
                is_error=event.is_error, failure=event.failure, content=event.content, duration_ms=event.duration_ms
            )
        elif isinstance(event, ApprovalRequested):
            self._call(event.call_id, event.tool, event.arguments).set_status("awaiting approval")
            card = ApprovalCard(
                approval_id=event.approval_id,
                tool=event.tool,
                arguments=event.arguments,
                reason=event.reason,
                kind=event.kind,
            )
            self._cards[event.approval_id] = card
            self._add(card)
        elif isinstance(event, ApprovalDecided):
            decided = self._cards.get(event.approval_id)
            if decided is not None:
                decided.resolve(event.decision, event.decided_by, event.reason)
        elif isinstance(event, RunFinished):
            self._finished(event)
        else:
            self._notice(event)

    def _text(self, run_id: str, step: int) -> AssistantText:
        block = self._texts.get((run_id, step))
        if block is None:
            block = self._texts[(run_id, step)] = AssistantText(run_id=run_id, step=step)
            self._add(block)
        return block

    def _tool_delta(self, event: ToolCallDelta) -> None:
        key = (event.run_id, event.step, event.index)
        block = self._streaming_tools.get(key)
        if block is None:
            block = ToolBlock(call_id=event.call_id, name=event.name, arguments="", status="writing")
            self._streaming_tools[key] = block
            if event.call_id:
                self._tools[event.call_id] = block
            self._add(block)
        block.stream(event.name, event.arguments)

    def _assistant(self, event: AssistantMessage) -> None:
        text = event.message.text
        if text or (event.run_id, event.step) in self._texts:
            self._text(event.run_id, event.step).finish(text)
        calls = [b for b in event.message.content if isinstance(b, ToolUseBlock)]
        for index, call in enumerate(calls):
            block = self._streaming_tools.pop((event.run_id, event.step, index), None)
            if block is None:
                block = self._call(call.id, call.name, call.input)
            self._tools[call.id] = block
            block.written(call.id, call.name, call.input)

    def _call(self, call_id: str, name: str, arguments: dict[str, Any]) -> ToolBlock:
        block = self._tools.get(call_id)
        if block is None:  # a call whose assistant message this view never saw (it attached later)
            block = self._tools[call_id] = ToolBlock(call_id=call_id, name=name, arguments=arguments)
            self._add(block)
        return block

    def _finished(self, event: RunFinished) -> None:
        self._streaming_tools = {k: v for k, v in self._streaming_tools.items() if k[0] != event.run_id}
        if event.status == "completed":
            return
        level = "warning" if event.status in ("cancelled", "interrupted", "needs_review") else "error"
        self._add(NoticeLine(f"run {event.status}: {event.reason}", level=level))

    def _notice(self, event: Event) -> None:
        if isinstance(event, Notice):
            self._add(NoticeLine(event.text, level=event.level))
        elif isinstance(event, ModelRetry):
            self._add(NoticeLine(f"model error, retrying in {event.delay_s:.0f}s: {event.error}", level="warning"))
        elif isinstance(event, ContextCompacted):
            self._add(NoticeLine(f"context compacted: {event.tokens_before} → {event.tokens_after} tokens"))
        elif isinstance(event, CompactionFailed):
            self._add(NoticeLine(f"compaction failed: {event.reason}", level="warning"))
        elif isinstance(event, ModelSwitched):
            self._add(NoticeLine(f"model: {event.previous} → {event.model}"))
        elif isinstance(event, RunResumed):
            self._add(NoticeLine(f"run resumed after step {event.after_step}"))
        elif isinstance(event, ServerFailed):
            self._add(NoticeLine(f"server {event.server} failed: {event.error}", level="error"))

    def _add(self, block: Widget) -> None:
        first_queued = next(iter(self._queued.values()), None)
        if first_queued is not None:
            self.mount(block, before=first_queued)
        else:
            self.mount(block)
