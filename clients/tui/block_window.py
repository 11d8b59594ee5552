"""A scrolling list of blocks of which only a window has widgets: the base of the conversation.

Each block is an :class:`~clients.tui.entry.Entry` (a record that can build its widget), and only a window of
consecutive blocks has widgets — the last ones when a session opens. Scrolling near the top of the window
mounts the blocks before it (keeping what is on screen where it was), scrolling near its bottom mounts the
ones after it, and blocks far from the view are dropped, so a session of 10,000 events opens and scrolls as
fast as a short one. Home jumps to the first blocks, End back to the last. The view stays at the bottom as
blocks come (``anchor``) until the user scrolls up, and follows again once they scroll back down.

Blocks that come in a burst (pages of history) are mounted together once the burst pauses, so only its last
blocks are ever mounted; a block that comes alone (live) is mounted at once.

Older blocks can also come later, above the first (:meth:`BlockWindow._prepend`: a session opened at its end
whose older history is read as the user scrolls up); the view stays where it was, and reaching the top of what
is there calls :meth:`BlockWindow._reached_top`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

from textual import events, on
from textual.containers import VerticalScroll
from textual.timer import Timer
from textual.widget import Widget

from clients.tui.entry import Entry

__all__ = ["CHUNK", "MOST", "WINDOW", "BlockWindow"]

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


class BlockWindow(VerticalScroll):
    """Blocks added with :meth:`_add`, mounted a window at a time; subclasses say what goes below them."""

    def __init__(self) -> None:
        super().__init__()
        self._entries: list[Entry[Any]] = []
        self._lo = self._hi = 0
        """The window: ``_entries[_lo:_hi]`` have mounted widgets, in order, before :meth:`_below_blocks`."""
        self._at_end = True
        """The window reaches the last block (new blocks are mounted as they come)."""
        self._following = True
        """The view is at the bottom and stays there as blocks come (the user has not scrolled up)."""
        self._flush_timer: Timer | None = None
        self._last_add = self._burst_began = 0.0
        self._moving = False
        """A window move is waiting for its layout (scroll events meanwhile are its own)."""
        self._gathering: list[Entry[Any]] | None = None
        """While :meth:`_gathered` is open, the blocks added, to go above the others."""

    @on(events.Mount)
    def _window_mounted(self) -> None:
        self.anchor()
        self.watch(self, "scroll_y", self._scrolled, init=False)

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

    def forget_blocks(self) -> None:
        """Drop every block, mounted or not (another session is about to be shown)."""
        if self._flush_timer is not None:
            self._flush_timer.stop()
            self._flush_timer = None
        self._entries.clear()
        self._lo = self._hi = 0
        self._at_end = self._following = True
        self.remove_children()
        self.anchor()

    def _below_blocks(self) -> Widget | None:
        """A widget that stays below every block (new blocks are mounted before it), if any."""
        return None

    def _reached_top(self) -> None:
        """The view reached the first block there is (subclasses may fetch older ones)."""

    @contextlib.contextmanager
    def _gathered(self) -> Iterator[list[Entry[Any]]]:
        """Blocks added meanwhile are kept aside in the list given (for :meth:`_prepend`), not shown."""
        gathered: list[Entry[Any]] = []
        self._gathering = gathered
        try:
            yield gathered
        finally:
            self._gathering = None

    def _prepend(self, entries: list[Entry[Any]]) -> None:
        """Put older blocks above the first one, keeping the view where it is."""
        if not entries:
            return
        self._entries[0:0] = entries
        at_top = self._lo == 0
        self._lo += len(entries)
        self._hi += len(entries)
        if at_top and self._lo < self._hi and self.is_mounted:  # the user is there: show the nearest at once
            self._mount_top(max(0, self._lo - CHUNK))
            if self._hi - self._lo > MOST:
                self._drop_bottom(self._hi - self._lo - MOST)

    def _add(self, entry: Entry[Any]) -> None:
        if self._gathering is not None:
            self._gathering.append(entry)
            return
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
            self.mount_all(widgets, before=self._below_blocks())
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
        elif y < old and y <= edge:
            self._reached_top()
        elif y > old and y >= self.max_scroll_y - edge and self._hi < len(self._entries):
            self._mount_bottom(min(len(self._entries), self._hi + CHUNK))
            if self._hi - self._lo > MOST:
                self._drop_top(self._hi - self._lo - MOST)

    # -- keys ---------------------------------------------------------------------------------------

    def action_page_up(self) -> None:
        """One page up, at once (an animated scroll would fight the view being kept in place as blocks come)."""
        self._up_at_top()
        self.scroll_page_up(animate=False)

    def action_scroll_up(self) -> None:
        """One line up (at the top, older blocks are asked for)."""
        self._up_at_top()
        super().action_scroll_up()

    @on(events.MouseScrollUp)
    def _wheel_up(self) -> None:
        self._up_at_top()

    def _up_at_top(self) -> None:
        """Up with the view at its top: nothing scrolls, so no scroll event mounts the blocks above or asks for more.

        The scroll event that brought the view there may have come while the window settled (and was ignored), so
        the blocks above the window are mounted here too; before the first block, older ones are asked for.
        """
        if self.scroll_y > 0:
            return
        if self._lo == 0:
            self._reached_top()
        elif not self._moving and self._flush_timer is None:  # settling: the next press finds it settled
            self._mount_top(max(0, self._lo - CHUNK))
            if self._hi - self._lo > MOST:
                self._drop_bottom(self._hi - self._lo - MOST)

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
