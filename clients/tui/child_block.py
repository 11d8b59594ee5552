"""One child session's run in its parent's conversation: who, what for, what it does now, how it ended.

Built from the parent's ``child_started`` / ``child_activity`` / ``child_finished`` events (and the approvals
tagged with the child), so a child is visible while it runs without opening it; Enter or a click opens the
child's own session.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from rich.text import Text
from textual import events, on
from textual.binding import Binding
from textual.message import Message
from textual.timer import Timer

from clients.timeline import first_line
from clients.tui.status_block import StatusBlock
from clients.tui.text import elapsed, short_result
from orchestrator.store.session_view import clean_title

__all__ = ["ChildBlock", "child_name"]

_STYLE = {
    "running": "cyan",
    "awaiting approval": "bold yellow",
    "completed": "green",
    "failed": "red",
    "cancelled": "yellow",
    "interrupted": "yellow",
}


def child_name(agent: str, child_session_id: str) -> str:
    """How a child is named to a person: ``'reviewer' (s_1a2b3c4d…)``, or just its short id without an agent."""
    short = child_session_id[:10] + "…" if len(child_session_id) > 10 else child_session_id
    agent = clean_title(agent)
    return f"'{agent}' ({short})" if agent else f"({short})"


class ChildBlock(StatusBlock, can_focus=True):
    """A child's run, from its start to its end: agent, goal, current tool, elapsed time, status, answer.

    | Key | Does |
    | --- | --- |
    | Enter / Space, click | open the child's session (Ctrl+B comes back) |
    """

    BINDINGS = [Binding("enter,space", "open", "Open the child", show=True)]

    @dataclass
    class Opened(Message):
        """The user asked to see the child's own session."""

        child_session_id: str

    def __init__(self, *, child_session_id: str, child_run_id: str, agent: str = "", goal: str = "", depth: int = 2):
        self.status = "running"
        self._status_class = "-running"
        super().__init__(classes=self._status_class)
        self.child_session_id = child_session_id
        self.child_run_id = child_run_id
        self.agent = agent
        self.goal = goal
        self.depth = depth
        self.tool = ""
        """The tool the child called last (while it runs)."""
        self.step = 0
        self.reason = ""
        self.answer = ""
        self.steps = 0
        self._started: float | None = None
        self._elapsed: float | None = None
        """The child's run time, once it ended."""
        self._ticker: Timer | None = None
        self._refresh_content()

    @on(events.Mount)
    def _mounted(self) -> None:
        self._show_status_class()
        if self.running and self._ticker is None:
            self._ticker = self.set_interval(1.0, self._refresh_content)

    @property
    def running(self) -> bool:
        """The child's run has not ended (it may wait for an approval)."""
        return self.status in ("running", "awaiting approval")

    @property
    def text(self) -> str:
        """What the block says now, as plain text."""
        return self._content().plain

    def started(self, *, agent: str, goal: str, depth: int, at: float) -> None:
        """The child's run began at ``at`` (the event's time, so elapsed is the same in every client)."""
        self.agent, self.goal, self.depth = agent or self.agent, goal or self.goal, depth
        self._started = at
        self._refresh_content()

    def activity(self, step: int, tool: str, at: float) -> None:
        """The child called ``tool`` at its step ``step``."""
        self.step, self.tool = step, tool
        if self._started is None:  # attached after the start: elapsed counts from what was seen
            self._started = at
        self._refresh_content()  # a call of its still waiting keeps it "awaiting approval" (its other calls go on)

    def waiting(self, waits: bool) -> None:
        """A call of the child waits for a decision (``waits``), or was just decided."""
        if self.running:
            self._set_status("awaiting approval" if waits else "running")
            self._refresh_content()

    def finished(self, *, status: str, reason: str, steps: int, elapsed_s: float, answer: str) -> None:
        """The child's run ended."""
        self.reason, self.steps, self._elapsed, self.answer = reason, steps, elapsed_s, answer
        self.tool = ""
        if self._ticker is not None:
            self._ticker.stop()
            self._ticker = None
        self._set_status(status)
        self._refresh_content()

    def parent_ended(self, status: str, at: float) -> None:
        """The parent's run ended (not completed) while this still showed running: its clock stops there."""
        if self.running:
            took = at - self._started if self._started is not None else 0.0
            self.finished(status=status, reason="its parent's run ended", steps=self.step, elapsed_s=took, answer="")

    def action_open(self) -> None:
        """Open the child's session."""
        self.post_message(self.Opened(self.child_session_id))

    @on(events.Click)
    def _clicked(self, event: events.Click) -> None:
        if self.screen.get_selected_text():
            return  # the click ended a text selection
        event.stop()
        self.action_open()

    def _content(self) -> Text:
        nested = "  " * max(0, self.depth - 2)  # a grandchild's block sits under its parent's
        line = Text(nested + "» child ", style="bold")
        line.append(child_name(self.agent, self.child_session_id), style="bold")
        status = self.status
        if self.running and self._started is not None:
            status += f" {elapsed(time.time() - self._started)}"
        elif self._elapsed is not None:
            steps = f"{self.steps} step{'s' if self.steps != 1 else ''}"
            status += f" · {steps} · {elapsed(self._elapsed)}"
        line.append(f"  [{status}]", style=_STYLE.get(self.status, ""))
        if self.goal:
            line.append(f"\n{nested}{first_line(self.goal)}", style="italic")
        if self.running and self.tool:
            line.append(f"\n{nested}→ {self.tool} (step {self.step})", style="cyan")
        if not self.running and self.status != "completed" and self.reason:
            line.append(f"\n{nested}{first_line(self.reason, 200)}", style="red")
        if self.answer:
            line.append("\n" + short_result(self.answer), style="dim")
        return line
