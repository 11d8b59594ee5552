"""The conversation of one session, rendered from its events: history first, then live.

Every block is made from events the daemon sent (stored ones, and the live ``text_delta`` /
``tool_call_delta`` that :class:`clients.loom.LiveFollower` makes): the TUI holds no state the daemon does
not have, so a second TUI on the same session shows the same thing.

A long session is not mounted whole: each block is an :class:`~clients.tui.entry.Entry` (a record that can
build its widget), and only a window of consecutive blocks has widgets — the last ones when the session
opens. Scrolling near the top of the window mounts the blocks before it (keeping what is on screen where it
was), scrolling near its bottom mounts the ones after it, and blocks far from the view are dropped, so a
session of 10,000 events opens and scrolls as fast as a short one. Home jumps to the session's first blocks,
End back to the last. The view stays at the bottom as blocks come (``anchor``) until the user scrolls up,
and follows again once they scroll back down.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from textual import events, on
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.timer import Timer
from textual.widget import Widget

from clients.tui.approval_card import ApprovalCard
from clients.tui.assistant_text import AssistantText
from clients.tui.entry import Entry
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

WINDOW = 20
"""Blocks mounted when a session opens (or after Home / End): more than a tall terminal shows (a block is at
least two lines), and few, because a Markdown block costs tens of milliseconds to mount."""
CHUNK = 12
"""Blocks mounted at once when the view nears an edge of the window."""
MOST = 60
"""Past this many mounted blocks, the ones farthest from the view are dropped."""
FLUSH_S = 0.03
"""Blocks that come less than this apart are a burst (pages of history), mounted together once it pauses."""
HISTORY_QUIET_S = 0.15
"""A burst of at least a window's worth of blocks is history: it counts as paused after this long."""
FLUSH_MAX_S = 1.0
"""A burst's blocks are mounted at the latest this long after its first one."""


class Conversation(VerticalScroll, can_focus=True):
    """The blocks of one session: user messages, assistant text, tool calls, approval cards, notices.

    | Key | Does |
    | --- | --- |
    | Home / End | the session's first blocks / its last (and follow it again) |
    | Page Up / Page Down, arrows, wheel | scroll (older blocks are mounted as you reach them) |
    | c | copy the text selected with the mouse |
    """

    BINDINGS = [Binding("c", "copy_selection", "Copy")]

    def __init__(self) -> None:
        super().__init__()
        self._entries: list[Entry[Any]] = []
        self._lo = self._hi = 0
        """The window: ``_entries[_lo:_hi]`` have mounted widgets, in order, before the queued messages."""
        self._at_end = True
        """The window reaches the session's last block (new blocks are mounted as they come)."""
        self._following = True
        """The view is at the bottom and stays there as blocks come (the user has not scrolled up)."""
        self._texts: dict[tuple[str, int], Entry[AssistantText]] = {}
        self._tools: dict[str, Entry[ToolBlock]] = {}
        """call_id -> its block."""
        self._streaming_tools: dict[tuple[str, int, int], Entry[ToolBlock]] = {}
        """(run, step, index) -> the block of a call whose arguments are streaming."""
        self._cards: dict[str, Entry[ApprovalCard]] = {}
        self._pending: set[str] = set()
        """Approvals with no stored decision yet."""
        self._queued: dict[str, UserMessageBlock] = {}
        """Queued messages: always mounted, below everything else, until their run starts."""
        self._flush_timer: Timer | None = None
        self._last_add = self._burst_began = 0.0
        self._moving = False
        """A window move is waiting for its layout (scroll events meanwhile are its own)."""

    @on(events.Mount)
    def _mounted(self) -> None:
        self.anchor()
        self.watch(self, "scroll_y", self._scrolled, init=False)

    # -- what the app and the tests read ------------------------------------------------------------

    @property
    def block_count(self) -> int:
        """How many blocks the session has (mounted or not)."""
        return len(self._entries)

    @property
    def batching(self) -> bool:
        """Blocks are waiting to be mounted with the rest of their burst."""
        return self._flush_timer is not None

    @property
    def window(self) -> tuple[int, int]:
        """The blocks that have widgets: ``(first, end)`` indexes into the session's blocks."""
        return self._lo, self._hi

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

    def pending_cards(self) -> list[ApprovalCard]:
        """Cards still waiting for a decision, oldest first (those in the window)."""
        if any(self._cards[a].widget is None for a in self._pending):
            self._flush()  # a card just asked for should take the keys now, not at the next batch
        cards = (self._cards[a].widget for a in self._pending)
        return sorted((c for c in cards if c is not None and c.pending), key=self._index_of)

    def clear(self) -> None:
        """Forget everything shown (another session is about to be shown)."""
        for mapping in (self._texts, self._tools, self._streaming_tools, self._cards, self._queued):
            mapping.clear()
        self._pending.clear()
        self._entries.clear()
        self._lo = self._hi = 0
        self._at_end = self._following = True
        self.remove_children()
        self.anchor()

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
        self._call(event.call_id, event.tool, event.arguments).change(lambda w: w.set_status("awaiting approval"))
        asked = event
        entry = Entry(
            lambda: ApprovalCard(
                approval_id=asked.approval_id,
                tool=asked.tool,
                arguments=asked.arguments,
                reason=asked.reason,
                kind=asked.kind,
            )
        )
        self._cards[event.approval_id] = entry
        self._pending.add(event.approval_id)
        self._add(entry)

    def _finished(self, event: RunFinished) -> None:
        self._streaming_tools = {k: v for k, v in self._streaming_tools.items() if k[0] != event.run_id}
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

    def _add_notice(self, text: str, level: str = "info") -> None:
        self._add(Entry(lambda: NoticeLine(text, level=level)))

    def _add(self, entry: Entry[Any]) -> None:
        self._entries.append(entry)
        now = time.monotonic()
        quiet = now - self._last_add >= FLUSH_S
        self._last_add = now
        if self._flush_timer is not None:
            return  # one more of a burst: the burst's timer mounts it with the rest
        if quiet:
            self._flush()  # a block that comes alone (live) is mounted at once
        else:
            self._burst_began = now
            self._flush_timer = self.set_timer(FLUSH_S, self._burst_paused)

    def _burst_paused(self) -> None:
        """Mount a burst's blocks (pages of history) once it pauses, or FLUSH_MAX_S after its first block.

        One timer per burst, not per block: a Textual timer costs more to make than a block's record.
        """
        self._flush_timer = None
        now = time.monotonic()
        # Many blocks waiting are history coming page after page: a page's round trip is a pause too short to
        # mount a window that the next page replaces (mounting one costs more than reading a page).
        quiet = HISTORY_QUIET_S if len(self._entries) - self._hi >= WINDOW else FLUSH_S
        if now - self._last_add < quiet and now - self._burst_began < FLUSH_MAX_S:
            wait = max(0.001, quiet - (now - self._last_add))  # Textual timers need a delay above 0
            self._flush_timer = self.set_timer(wait, self._burst_paused)
            return
        self._flush()

    # -- the window ---------------------------------------------------------------------------------

    def _flush(self) -> None:
        """Mount the blocks added since the last batch, where the window reaches the end of the session."""
        if self._flush_timer is not None:
            self._flush_timer.stop()
            self._flush_timer = None
        end = len(self._entries)
        if self._hi == end or not self.is_mounted or not self._at_end:
            return  # nothing new, or the user reads older blocks: the new ones mount as they scroll to them
        following = self._following or self._lo == self._hi
        if not following:  # scrolled up in a window that reaches the end: what comes goes below, off screen
            self._mount_bottom(max(self._hi, min(end, self._lo + MOST)))
        elif end - self._hi > WINDOW:  # a page of history, or a burst: only its last blocks are shown
            self._set_window(max(0, end - WINDOW), end)
        else:
            self._mount_bottom(end)
            if self._hi - self._lo > MOST:
                self._drop_top(self._hi - self._lo - WINDOW, keep=False)  # the anchor keeps the bottom

    def _set_window(self, lo: int, hi: int) -> None:
        """Replace the mounted blocks by ``_entries[lo:hi]``."""
        self._remove(self._entries[self._lo : self._hi])
        self._lo = self._hi = lo
        self._mount_bottom(hi)

    def _mount_bottom(self, hi: int) -> None:
        widgets = [e.build() for e in self._entries[self._hi : hi]]
        self._hi = hi
        self._at_end = hi == len(self._entries)
        if widgets:
            self.mount_all(widgets, before=next(iter(self._queued.values()), None))
            self._hold()

    def _mount_top(self, lo: int) -> None:
        first = self._entries[self._lo].widget if self._lo < self._hi else None
        widgets = [e.build() for e in self._entries[lo : self._lo]]
        self._lo = lo
        if widgets:
            self.mount_all(widgets, before=first)
            if first is not None:
                self._keep_in_place(first)

    def _drop_top(self, count: int, *, keep: bool = True) -> None:
        dropped = self._entries[self._lo : self._lo + count]
        self._lo += count
        stays = self._entries[self._lo].widget if self._lo < self._hi else None
        if keep and stays is not None:
            self._keep_in_place(stays)
        self._remove(dropped)

    def _drop_bottom(self, count: int) -> None:
        dropped = self._entries[self._hi - count : self._hi]
        self._hi -= count
        self._at_end = False
        self._remove(dropped)

    def _remove(self, entries: list[Entry[Any]]) -> None:
        for entry in entries:
            widget = entry.drop()
            if widget is not None:
                widget.remove()
        self._hold()  # the view shrinking under the removed blocks is not the user scrolling up

    def _hold(self) -> None:
        """Ignore scrolling until the blocks just mounted are laid out (until then the view's size is wrong)."""
        self._moving = True
        self.call_after_refresh(self.call_after_refresh, self._release)

    def _release(self) -> None:
        self._moving = False

    def _keep_in_place(self, widget: Widget, frames: int = 4) -> None:
        """Keep ``widget`` where it is on screen while blocks above it come or go.

        The new blocks' heights are known once they are laid out (a frame later); the view moves by what they
        added, and is checked again for a few frames in case a block's height changed again.
        """
        offset = widget.virtual_region.y - self.scroll_y
        self._moving = True

        def settle(left: int) -> None:
            moved = False
            if widget.is_attached:
                target = widget.virtual_region.y - offset
                if abs(target - self.scroll_y) >= 1:
                    self.scroll_to(y=target, animate=False, immediate=True, release_anchor=False)
                    moved = True
            if moved and left > 0 and widget.is_attached:
                self.call_after_refresh(settle, left - 1)
            else:
                self._moving = False

        self.call_after_refresh(settle, frames)

    def _scrolled(self, old: float, y: float) -> None:
        """Mount more blocks as the user scrolls near an edge of the window; drop the far side past ``MOST``.

        Only a move towards that edge counts: the view also moves when blocks grow under the anchor, or when
        blocks mounted above are compensated for, and neither should load more.
        """
        if self._moving or self._flush_timer is not None:
            return  # a move settling, or blocks waiting for their batch: the window is not where it will be
        if y < old:
            self._following = False
        elif y >= self.max_scroll_y - 1 and self._at_end:
            self._following = True
        edge = max(self.size.height, 5)
        if y < old and y <= edge and self._lo > 0:
            self._mount_top(max(0, self._lo - CHUNK))
            if self._hi - self._lo > MOST:
                self._drop_bottom(self._hi - self._lo - MOST)
        elif y > old and y >= self.max_scroll_y - edge and self._hi < len(self._entries):
            self._mount_bottom(min(len(self._entries), self._hi + CHUNK))
            if self._hi - self._lo > MOST:
                self._drop_top(self._hi - self._lo - MOST)

    def _index_of(self, widget: Widget) -> int:
        try:
            return self.children.index(widget)
        except ValueError:
            return len(self.children)

    # -- keys ---------------------------------------------------------------------------------------

    def action_page_up(self) -> None:
        """One page up, at once (an animated scroll would fight the view being kept in place as blocks come)."""
        self.scroll_page_up(animate=False)

    def action_page_down(self) -> None:
        """One page down, at once."""
        self.scroll_page_down(animate=False)

    def action_scroll_home(self) -> None:
        """The session's first blocks."""
        if self._lo > 0:
            self._set_window(0, min(len(self._entries), WINDOW))
        self.scroll_home(animate=False, immediate=True)

    def action_scroll_end(self) -> None:
        """The session's last blocks, following what comes."""
        self._flush()
        end = len(self._entries)
        if self._hi < end:
            self._set_window(max(0, end - WINDOW), end)
        self._following = True
        self.anchor()

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
