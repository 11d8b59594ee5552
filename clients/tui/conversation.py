"""The conversation of one session, rendered from its events: history first, then live.

Every block is made from events the daemon sent (stored ones, and the live ``text_delta`` /
``tool_call_delta`` that :class:`clients.loom.LiveFollower` makes): the TUI holds no state the daemon does
not have, so a second TUI on the same session shows the same thing.

Each event becomes a change to a block's :class:`~clients.tui.entry.Entry`; which blocks have widgets (a
window of them, so that a long session opens and scrolls as fast as a short one) is
:class:`~clients.tui.block_window.BlockWindow`'s business.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.binding import Binding
from textual.message import Message
from textual.widget import Widget

from clients.cli.render import question_line
from clients.long_work_lines import notice_line
from clients.server_rows import server_event_line
from clients.tui.approval_card import ApprovalCard
from clients.tui.assistant_text import AssistantText
from clients.tui.block_window import BlockWindow
from clients.tui.child_block import ChildBlock
from clients.tui.children import Children
from clients.tui.entry import Entry
from clients.tui.goal_view import GoalBlock, GoalEvent, Goals
from clients.tui.graph_view import GraphBlock, Graphs
from clients.tui.notice_line import NoticeLine
from clients.tui.question_card import QuestionCard
from clients.tui.tool_block import ToolBlock
from clients.tui.user_message import UserMessageBlock
from orchestrator.events import (
    ApprovalDecided,
    ApprovalRequested,
    AssistantMessage,
    ChildActivity,
    ChildFinished,
    ChildStarted,
    CompactionFailed,
    ContextCompacted,
    ModelRetry,
    ModelSwitched,
    Notice,
    OrchestrationFinished,
    OrchestrationStarted,
    QuestionAnswered,
    QuestionAsked,
    RunFinished,
    RunQueued,
    RunResumed,
    ServerFailed,
    ServerLog,
    ServerStateChanged,
    SessionCreated,
    TaskGraphPlanned,
    TaskGraphPlanning,
    TaskStateChanged,
    TextDelta,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallStarted,
    ToolProgress,
    UserMessage,
)
from orchestrator.events_long import TodoUpdated
from orchestrator.messages import ToolUseBlock
from orchestrator.protocol import Event
from orchestrator.store.session_view import clean_title

__all__ = ["Conversation"]


class Conversation(BlockWindow, can_focus=True):
    """The blocks of one session: user messages, assistant text, tool calls, approval cards, notices.

    | Key | Does |
    | --- | --- |
    | Home / End | the session's first blocks / its last (and follow it again) |
    | Page Up / Page Down, arrows, wheel | scroll (older blocks are mounted as you reach them) |
    | c | copy the text selected with the mouse |
    """

    BINDINGS = [Binding("c", "copy_selection", "Copy")]

    class OlderWanted(Message):
        """The user reached the top of what is shown while older history remains (``everything``: Home)."""

        def __init__(self, everything: bool) -> None:
            super().__init__()
            self.everything = everything

    def __init__(self) -> None:
        super().__init__()
        self.has_older = False
        """Older history than the first block remains (the session was opened at its end): reaching the top
        asks for it (:class:`OlderWanted`), and :meth:`show_older` puts it above."""
        self._texts: dict[tuple[str, int], Entry[AssistantText]] = {}
        self._tools: dict[str, Entry[ToolBlock]] = {}
        """call_id -> its block."""
        self._streaming_tools: dict[tuple[str, int, int], Entry[ToolBlock]] = {}
        """(run, step, index) -> the block of a call whose arguments are streaming."""
        self._cards: dict[str, Entry[ApprovalCard]] = {}
        self._pending: set[str] = set()
        """Approvals with no stored decision yet."""
        self._card_runs: dict[str, str] = {}
        """approval_id -> the run that asked (its end leaves the card with nothing to decide)."""
        self._queued: dict[str, UserMessageBlock] = {}
        """Queued messages: always mounted, below everything else, until their run starts."""
        self._kids = Children()
        """The blocks of the children's runs, and which approvals are a child's."""
        self._graphs = Graphs()
        """The orchestrations' task graphs."""
        self._goals = Goals()
        """The goals' blocks (on a goal's own session)."""
        self._questions: dict[str, Entry[QuestionCard]] = {}
        """question_id -> its card (a server's question; the card becomes a line once answered)."""
        self._question_ends: dict[str, QuestionAnswered] = {}
        """Answers read before their question (older history read later): its card is shown answered."""

    # -- what the app and the tests read ------------------------------------------------------------

    @property
    def texts(self) -> list[AssistantText]:
        """The assistant's text blocks that have widgets, in order."""
        self._flush()
        return [e.widget for e in self._texts.values() if e.widget is not None]

    def tool(self, call_id: str) -> ToolBlock | None:
        """The block of a tool call (None if unknown, or outside the window)."""
        self._flush()
        entry = self._tools.get(call_id)
        return entry.widget if entry else None

    def card(self, approval_id: str) -> ApprovalCard | None:
        """The card of an approval (None if unknown, or outside the window)."""
        self._flush()
        entry = self._cards.get(approval_id)
        return entry.widget if entry else None

    def question(self, question_id: str) -> QuestionCard | None:
        """The card of a server's question (None if unknown, or outside the window)."""
        self._flush()
        entry = self._questions.get(question_id)
        return entry.widget if entry else None

    def child(self, child_session_id: str) -> ChildBlock | None:
        """The block of a child's latest run (None if unknown, or outside the window)."""
        self._flush()
        entry = self._kids.block(child_session_id)
        return entry.widget if entry else None

    def graph(self, orchestration_id: str) -> GraphBlock | None:
        """The block of an orchestration's task graph (None if unknown, or outside the window)."""
        self._flush()
        entry = self._graphs.block(orchestration_id)
        return entry.widget if entry else None

    def goal(self, goal_id: str) -> GoalBlock | None:
        """The block of a goal (None if unknown, or outside the window)."""
        self._flush()
        entry = self._goals.block(goal_id)
        return entry.widget if entry else None

    def add_block(self, make: Callable[[], Widget]) -> None:
        """Add a block a command made (``make`` builds it; it is rebuilt the same when scrolled back to)."""
        self._add(Entry(make))

    def pending_cards(self) -> list[ApprovalCard]:
        """Cards still waiting for a decision, oldest first (those in the window)."""
        if any(self._cards[a].widget is None for a in self._pending):
            self._flush()  # a card just asked for should take the keys now, not at the next batch
        cards = (self._cards[a].widget for a in self._pending)
        return sorted((c for c in cards if c is not None and c.pending), key=self._index_of)

    def clear(self) -> None:
        """Forget everything shown (another session is about to be shown)."""
        for mapping in (self._texts, self._tools, self._streaming_tools, self._cards, self._queued, self._questions):
            mapping.clear()
        self._pending.clear()
        self._question_ends.clear()
        self._card_runs.clear()
        self._kids = Children()
        self._graphs = Graphs()
        self._goals = Goals()
        self.has_older = False
        self.forget_blocks()

    def show_older(self, events: list[Event]) -> None:
        """Render older history (whole runs, oldest first) above everything shown, keeping the view in place.

        The events are rendered from a fresh state, as if the session began with them, so an older run's
        events never change a newer block (a ``user_message`` would otherwise take a newer queued message's
        place). A ``run_queued`` among them is skipped: its run started since, in the history already shown.
        """
        newer = (self._texts, self._tools, self._streaming_tools, self._cards, self._pending, self._card_runs)
        newer_queued = self._queued
        newer_kids, self._kids = self._kids, Children()
        newer_graphs, self._graphs = self._graphs, Graphs()
        newer_goals, self._goals = self._goals, Goals()
        self._texts, self._tools, self._streaming_tools, self._cards = {}, {}, {}, {}
        self._pending, self._card_runs, self._queued = set(), {}, {}
        try:
            with self._gathered() as entries:
                for event in events:
                    if not isinstance(event, RunQueued):
                        self.show(event)
        finally:
            older = (self._texts, self._tools, self._cards, self._pending, self._card_runs)
            older_kids, self._kids = self._kids, newer_kids
            older_graphs, self._graphs = self._graphs, newer_graphs
            older_goals, self._goals = self._goals, newer_goals
            self._texts, self._tools, self._streaming_tools, self._cards, self._pending, self._card_runs = newer
            self._queued = newer_queued
        # Ids are a run's own, so the older blocks join the lookups (a resumed run may still finish an old call);
        # older first, so that the dicts keep the session's order.
        self._texts, self._tools, self._cards = (
            {**older[0], **self._texts},
            {**older[1], **self._tools},
            {**older[2], **self._cards},
        )
        self._pending |= older[3]
        self._card_runs = {**older[4], **self._card_runs}
        self._kids.put_older(older_kids)
        self._graphs.put_older(older_graphs)
        self._goals.put_older(older_goals)
        self._prepend(entries)

    def _reached_top(self) -> None:
        if self.has_older:
            self.post_message(self.OlderWanted(everything=False))

    def action_scroll_home(self) -> None:
        """The session's first blocks (older history, if not read yet, is read first)."""
        if self.has_older:
            self.post_message(self.OlderWanted(everything=True))
        super().action_scroll_home()

    # -- events -------------------------------------------------------------------------------------

    def show(self, event: Event) -> None:
        """Render one event (those that change nothing visible are skipped)."""
        if isinstance(event, TextDelta):
            text = event.text
            self._text(event.run_id, event.step).change(lambda w: w.feed(text))
        elif isinstance(event, ToolCallDelta):
            self._tool_delta(event)
        elif isinstance(event, AssistantMessage):
            self._assistant(event)
        elif isinstance(event, UserMessage):
            queued = self._queued.pop(event.run_id, None)
            if queued is not None:
                queued.remove()
            text, run_id = event.text, event.run_id
            self._add(Entry(lambda: UserMessageBlock(text, run_id=run_id)))
        elif isinstance(event, RunQueued):
            block = UserMessageBlock(event.text, run_id=event.run_id, queued=True)
            self._queued[event.run_id] = block
            self.mount(block)
        elif isinstance(event, ToolCallStarted):
            ts = event.ts
            self._call(event.call_id, event.tool, event.arguments).change(lambda w: w.set_status("running", started=ts))
        elif isinstance(event, ToolProgress):
            moved = event
            entry = self._tools.get(event.call_id)
            if entry is not None:  # a report about a call not shown (an older page's) has nothing to move
                entry.change(lambda w: w.progressed(moved.progress, moved.total, moved.message))
        elif isinstance(event, ToolCallFinished):
            done = event
            self._call(event.call_id, event.tool, {}).change(
                lambda w: w.finished(
                    is_error=done.is_error,
                    failure=done.failure,
                    content=done.content,
                    duration_ms=done.duration_ms,
                    structured=done.structured,
                )
            )
        elif isinstance(event, ApprovalRequested):
            self._approval(event)
        elif isinstance(event, ApprovalDecided):
            decided = self._cards.get(event.approval_id)
            if decided is not None:
                self._pending.discard(event.approval_id)
                d = event
                decided.change(lambda w: w.resolve(d.decision, d.decided_by, d.reason))
            if event.child_session_id:
                self._kids.waits(event.child_session_id, self._pending)
        elif isinstance(event, ChildStarted | ChildActivity | ChildFinished):
            self._child(event)
        elif isinstance(
            event,
            OrchestrationStarted | TaskGraphPlanning | TaskGraphPlanned | TaskStateChanged | OrchestrationFinished,
        ):
            self._graphs.show(event, self._add)
        elif isinstance(event, GoalEvent):
            self._goals.show(event, self._add)
        elif isinstance(event, TodoUpdated):
            pass  # the checklist over the prompt shows the plan (clients/tui/todo_list.py), not a line per update
        elif isinstance(event, RunFinished):
            self._finished(event)
        else:
            self._notice(event)

    def _text(self, run_id: str, step: int) -> Entry[AssistantText]:
        entry = self._texts.get((run_id, step))
        if entry is None:
            entry = self._texts[(run_id, step)] = Entry(lambda: AssistantText(run_id=run_id, step=step))
            self._add(entry)
        return entry

    def _tool_delta(self, event: ToolCallDelta) -> None:
        key = (event.run_id, event.step, event.index)
        entry = self._streaming_tools.get(key)
        if entry is None:
            call_id, name = event.call_id, event.name
            entry = Entry(lambda: ToolBlock(call_id=call_id, name=name, arguments="", status="writing"))
            self._streaming_tools[key] = entry
            if event.call_id:
                self._tools[event.call_id] = entry
            self._add(entry)
        name, piece = event.name, event.arguments
        entry.change(lambda w: w.stream(name, piece))

    def _assistant(self, event: AssistantMessage) -> None:
        text = event.message.text
        if text or (event.run_id, event.step) in self._texts:
            self._text(event.run_id, event.step).change(lambda w: w.finish(text), replaces=True)
        calls = [b for b in event.message.content if isinstance(b, ToolUseBlock)]
        for index, call in enumerate(calls):
            entry = self._streaming_tools.pop((event.run_id, event.step, index), None)
            if entry is None:
                entry = self._call(call.id, call.name, call.input)
            self._tools[call.id] = entry
            entry.change(_written(call))

    def _call(self, call_id: str, name: str, arguments: dict[str, Any]) -> Entry[ToolBlock]:
        entry = self._tools.get(call_id)
        if entry is None:  # a call whose assistant message this view never saw (it attached later)
            entry = self._tools[call_id] = Entry(lambda: ToolBlock(call_id=call_id, name=name, arguments=arguments))
            self._add(entry)
        return entry

    def _approval(self, event: ApprovalRequested) -> None:
        child = event.child_session_id
        if child:  # a child's call: this session's conversation has no block for it, its child block says it waits
            self._kids.cards[event.approval_id] = child
        else:
            self._call(event.call_id, event.tool, event.arguments).change(lambda w: w.set_status("awaiting approval"))
        agent = self._kids.agent(child)
        asked = event
        entry = Entry(
            lambda: ApprovalCard(
                approval_id=asked.approval_id,
                tool=asked.tool,
                arguments=asked.arguments,
                reason=asked.reason,
                kind=asked.kind,
                run_id=asked.run_id,
                child_session_id=asked.child_session_id,
                child_agent=agent,
            )
        )
        self._cards[event.approval_id] = entry
        self._pending.add(event.approval_id)
        self._card_runs[event.approval_id] = event.run_id
        self._add(entry)
        if child:
            self._kids.waits(child, self._pending)

    # -- children -----------------------------------------------------------------------------------

    def _child(self, event: ChildStarted | ChildActivity | ChildFinished) -> None:
        self._kids.show(event, self._add)
        if isinstance(event, ChildFinished):  # its run is over: a card of its still undecided has nothing to answer
            child, status = event.child_session_id, event.status
            for approval_id in [a for a in self._pending if self._kids.cards.get(a) == child]:
                self._pending.discard(approval_id)
                self._cards[approval_id].change(lambda w: w.expire(status))

    def _finished(self, event: RunFinished) -> None:
        self._streaming_tools = {k: v for k, v in self._streaming_tools.items() if k[0] != event.run_id}
        # A run that ends (cancelled, failed) with a card undecided leaves nothing waiting for it: no keys on it.
        status = event.status
        for approval_id in [a for a in self._pending if self._card_runs.get(a) == event.run_id]:
            self._pending.discard(approval_id)
            self._cards[approval_id].change(lambda w: w.expire(status))
        if status != "completed":  # children still shown running ended with it (their own end may not be read)
            self._kids.parent_ended(event.run_id, status, event.ts)
        if event.status == "completed":
            return
        level = "warning" if event.status in ("cancelled", "interrupted", "needs_review") else "error"
        self._add_notice(f"run {event.status}: {event.reason}", level)

    def _notice(self, event: Event) -> None:
        if isinstance(event, Notice):
            self._add_notice(event.text, event.level)
        elif isinstance(event, ModelRetry):
            self._add_notice(f"model error, retrying in {event.delay_s:.0f}s: {event.error}", "warning")
        elif isinstance(event, ContextCompacted):
            self._add_notice(f"context compacted: {event.tokens_before} → {event.tokens_after} tokens")
        elif isinstance(event, CompactionFailed):
            self._add_notice(f"compaction failed: {event.reason}", "warning")
        elif isinstance(event, ModelSwitched):
            self._add_notice(f"model: {event.previous} → {event.model}")
        elif isinstance(event, RunResumed):
            self._add_notice(f"run resumed after step {event.after_step}")
        elif isinstance(event, ServerFailed):
            self._add_notice(f"server {event.server} failed: {event.error}", "error")
        elif isinstance(event, ServerStateChanged | ServerLog):
            line = server_event_line(event)
            if line is not None:
                self._add_notice(*line)
        elif isinstance(event, QuestionAsked):
            self._question(event)
        elif isinstance(event, QuestionAnswered):
            answered, entry = event, self._questions.get(event.question_id)
            if entry is None:  # asked before what this view read: a line says how it ended
                self._question_ends[event.question_id] = event
                self._add_notice(question_line(event))
            else:
                entry.change(lambda w: w.resolve(answered.action, answered.answered_by, answered.reason))
        elif isinstance(event, SessionCreated) and event.parent_session_id:
            agent = f" as '{clean_title(event.agent)}'" if event.agent else ""
            self._add_notice(f"a child session of {event.parent_session_id}{agent} (Ctrl+B opens the parent)")
        elif (line := notice_line(event)) is not None:  # hooks, loops, handoffs, memory (clients/long_work_lines.py)
            self._add_notice(*line)

    def _question(self, event: QuestionAsked) -> None:
        asked, agent = event, self._kids.agent(event.child_session_id)
        entry = Entry(
            lambda: QuestionCard(
                question_id=asked.question_id,
                server=asked.server,
                message=asked.message,
                requested_schema=asked.requested_schema,
                mode=asked.mode,
                url=asked.url,
                child_session_id=asked.child_session_id,
                child_agent=agent,
            )
        )
        self._questions[event.question_id] = entry
        ended = self._question_ends.pop(event.question_id, None)
        if ended is not None:  # its answer is in newer history, already read: never offer it as open
            entry.change(lambda w: w.resolve(ended.action, ended.answered_by, ended.reason))
        self._add(entry)

    def _add_notice(self, text: str, level: str = "info") -> None:
        self._add(Entry(lambda: NoticeLine(text, level=level)))

    def _below_blocks(self) -> Widget | None:
        return next(iter(self._queued.values()), None)

    def _index_of(self, widget: Widget) -> int:
        try:
            return self.children.index(widget)
        except ValueError:
            return len(self.children)

    # -- keys ---------------------------------------------------------------------------------------

    def action_copy_selection(self) -> None:
        """Copy the text selected with the mouse to the clipboard."""
        selected = self.screen.get_selected_text()
        if selected:
            self.app.copy_to_clipboard(selected)
            self.app.notify(f"copied {len(selected)} characters")
        else:
            self.app.notify("select text with the mouse first (drag over it), then press c", severity="warning")


def _written(call: ToolUseBlock) -> Callable[[ToolBlock], None]:
    """The change a stored call makes to its block (a function, so each call of a loop keeps its own)."""
    return lambda block: block.written(call.id, call.name, call.input)
