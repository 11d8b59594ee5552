"""The side panel: every session, the ones waiting for a person first, then the current directory's."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import on
from textual.message import Message
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from orchestrator.protocol import SessionInfo

__all__ = ["SessionsPanel", "order_sessions"]


def order_sessions(sessions: list[SessionInfo], cwd: str, waiting: set[str]) -> list[SessionInfo]:
    """Those waiting for an approval first, then those of ``cwd``, then the rest; newest first within each."""
    return sorted(sessions, key=lambda s: (s.session_id not in waiting, s.cwd != cwd))


class SessionsPanel(OptionList):
    """Sessions with their status and model; Enter (or a click) switches to one."""

    @dataclass
    class Chosen(Message):
        """The user picked a session."""

        session_id: str

    def __init__(self) -> None:
        super().__init__(id="sessions")
        self.border_title = "sessions"
        self.sessions: list[SessionInfo] = []
        self._signature: object = None

    def show_sessions(self, sessions: list[SessionInfo], *, cwd: str, waiting: set[str], current: str | None) -> None:
        """Replace the list, keeping the highlight on the session it was on (or on ``current``)."""
        ordered = order_sessions(sessions, cwd, waiting)
        signature = ([s.model_dump() for s in ordered], sorted(waiting), current)
        if signature == self._signature:
            return  # nothing changed: no redraw
        self._signature = signature
        keep = self.highlighted_option.id if self.highlighted_option is not None else current
        self.sessions = ordered
        self.clear_options()
        self.add_options(
            [Option(self._label(s, s.session_id in waiting, s.session_id == current), s.session_id) for s in ordered]
        )
        ids = [s.session_id for s in ordered]
        if keep in ids:
            self.highlighted = ids.index(keep)

    @staticmethod
    def _label(session: SessionInfo, waiting: bool, current: bool) -> Text:
        label = Text("▶ " if current else "  ", style="bold")
        label.append(session.session_id.removeprefix("s_")[:8], style="bold" if current else "")
        if waiting:
            label.append(" needs you", style="bold yellow")
        elif session.state == "active":
            label.append(" running", style="cyan")
        else:
            label.append(f" {session.state}", style="dim")
        model = session.model.split(":", 1)[-1].rsplit("/", 1)[-1]
        label.append(f"\n  {model[:18]}", style="dim")
        if session.context_ratio is not None:
            label.append(f" {session.context_ratio:.0%}", style="dim")
        return label

    @on(OptionList.OptionSelected)
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option.id is not None:
            self.post_message(self.Chosen(event.option.id))
