"""One tool call in the conversation: its name, short arguments, status, and a short result or the full one."""

from __future__ import annotations

import time
from typing import Any

from rich.text import Text
from textual import events, on
from textual.binding import Binding
from textual.timer import Timer

from clients.server_rows import plain
from clients.tui.diff_view import SHORT_LINES, FileChange, file_change, render_diff
from clients.tui.status_block import StatusBlock
from clients.tui.text import short_arguments, short_result

__all__ = ["ToolBlock"]

_STATUS_STYLE = {
    "writing": "dim",
    "waiting": "yellow",
    "awaiting approval": "bold yellow",
    "running": "cyan",
    "done": "green",
    "failed": "red",
}


class ToolBlock(StatusBlock, can_focus=True):
    """A tool call, from the model writing it to its result.

    Its ``status`` is ``writing`` (arguments still streaming), ``waiting`` (written, not started),
    ``awaiting approval``, ``running`` (with the time since it started), ``done`` or ``failed`` (with the
    failure kind: ``denied``, ``timed_out``, ``tool_error``...). A file edit or write shows its diff. The
    short result (and the diff's first lines) is the default; Enter on the focused block, or a click, shows
    the whole result and diff, and again goes back.

    | Key | Does |
    | --- | --- |
    | Enter / Space | show the full result (and the whole diff), or the short one again |
    """

    BINDINGS = [
        Binding("enter,space", "expand", "Full result", show=True),
    ]

    def __init__(self, *, call_id: str, name: str, arguments: dict[str, Any] | str, status: str = "waiting") -> None:
        self._status_class = "-" + status.replace(" ", "-")
        super().__init__(classes=self._status_class)
        self.call_id = call_id
        self.tool = name
        self.arguments: dict[str, Any] | str = arguments
        self.status = status
        self.failure: str | None = None
        self.result = ""
        """The first lines of the result."""
        self.full_result = ""
        """The whole result, as the model saw it."""
        self.expanded = False
        """The full result (and the whole diff) is shown."""
        self.structured: dict[str, Any] | None = None
        self._started: float | None = None
        self._duration: float | None = None
        self._ticker: Timer | None = None
        self.progress = ""
        """What the server last reported of its progress on the call while it runs (``2/12 step 2``)."""
        self._refresh_content()

    @on(events.Mount)
    def _mounted(self) -> None:
        self._show_status_class()
        if self.status == "running" and self._ticker is None:
            self._ticker = self.set_interval(1.0, self._refresh_content)

    @property
    def change(self) -> FileChange | None:
        """The file change this call makes, if it is a file edit or write."""
        return file_change(self.tool, self.arguments, self.structured)

    def stream(self, name: str, piece: str) -> None:
        """More of the arguments' JSON text as the model writes it."""
        self.tool = name or self.tool
        if isinstance(self.arguments, str):
            self.arguments += piece
        self._refresh_content()

    def written(self, call_id: str, name: str, arguments: dict[str, Any]) -> None:
        """The whole call, from the stored assistant message."""
        self.call_id, self.tool, self.arguments = call_id, name, arguments
        if self.status == "writing":
            self._set_status("waiting")
        self._refresh_content()

    def set_status(self, status: str, *, started: float | None = None) -> None:
        """Move the call on (``started``: when it started running, for the elapsed time)."""
        if status == "running":
            self._started = started or time.time()
            if self.is_mounted and self._ticker is None:
                self._ticker = self.set_interval(1.0, self._refresh_content)
        self._set_status(status)
        self._refresh_content()

    def progressed(self, progress: float, total: float | None, message: str) -> None:
        """The server reported progress on the running call (shown by its status until it ends)."""
        done = f"{progress:g}/{total:g}" if total else f"{progress:g}"
        self.progress = f"{done} {plain(message, 60)}".strip()
        self._refresh_content()

    def finished(
        self,
        *,
        is_error: bool,
        failure: str | None,
        content: str,
        duration_ms: float,
        structured: dict[str, Any] | None = None,
    ) -> None:
        """The call ended with ``content`` (what the model sees) and its ``structured`` result."""
        self.failure = failure or ("tool_error" if is_error else None)
        self.result = short_result(content)
        self.full_result = content.strip()
        self.structured = structured
        self._duration = duration_ms / 1000
        if self._ticker is not None:
            self._ticker.stop()
            self._ticker = None
        self._set_status("failed" if is_error else "done")
        self._refresh_content()

    def action_expand(self) -> None:
        """Show the full result, or the short one again."""
        self.expanded = not self.expanded
        self.set_class(self.expanded, "-expanded")
        self._refresh_content()

    @on(events.Click)
    def _clicked(self, event: events.Click) -> None:
        if self.screen.get_selected_text():
            return  # the click ended a text selection: leave the block as it is
        event.stop()
        self.action_expand()

    def _content(self) -> Text:
        change = self.change
        line = Text("⚙ ", style="bold")
        line.append(self.tool or "…", style="bold")
        # a file change's old and new text are in its diff: its path is all the arguments need to say
        line.append(" " + (change.path if change else short_arguments(self.arguments)), style="dim")
        status = self.status
        if status == "running" and self._started is not None:
            status += f" {max(0.0, time.time() - self._started):.0f}s"
        elif status in ("done", "failed") and self._duration is not None:
            status += f" {self._duration:.1f}s"
        if self.failure:
            status += f" ({self.failure})"
        if self.status == "running" and self.progress:
            status += f" · {self.progress}"
        line.append(f"  [{status}]", style=_STATUS_STYLE.get(self.status, ""))
        # one Text, not a Group, so that the block's text can be selected and copied
        # a failed change did not happen, and one awaiting approval has its diff on the card below
        change = change if self.status not in ("failed", "awaiting approval") else None
        if change is not None:
            line.append("\n")
            line.append_text(render_diff(change, None if self.expanded else SHORT_LINES))
        result = self.full_result if self.expanded else self.result
        if result and (change is None or self.status == "failed" or self.expanded):
            line.append("\n" + result, style="red" if self.status == "failed" else "dim")
        return line
