"""The side panel: every session, those waiting for a person first ("needs you"), then the current directory's.

Each entry shows the session's title (or its id), its status, model and watermark, all from ``list_sessions``.
``r`` renames the highlighted session and ``x`` archives it (after a yes/no); the panel only asks, and the app
makes the calls, as for everything else it sends the daemon.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import on
from textual.binding import Binding
from textual.message import Message
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from clients.tui.session_dialogs import ConfirmArchive, RenameDialog
from orchestrator.protocol import SessionInfo
from orchestrator.store.session_view import NEEDS_YOU, clean_title

__all__ = ["NEEDS_YOU_HEADER", "SessionsPanel", "needs_you", "order_sessions"]

NEEDS_YOU_HEADER = "needs you"
LABEL_WIDTH = 24
"""What fits in the panel (28 columns less its border and scrollbar)."""

_STATUS = {
    "running": ("running", "cyan"),
    "awaiting_approval": ("approval", "bold yellow"),
    "needs_review": ("review", "bold yellow"),
    "failed": ("failed", "red"),
    "interrupted": ("interrupted", "yellow"),
    "idle": ("idle", "dim"),
    "archived": ("archived", "dim"),
}
"""How each status is shown: a short word (the section says why it is there) and its style."""


def needs_you(session: SessionInfo, waiting: set[str]) -> bool:
    """Whether the session waits for a person: an approval, or a review of a call an interruption left unfinished."""
    return session.status in NEEDS_YOU or session.session_id in waiting


def order_sessions(sessions: list[SessionInfo], cwd: str, waiting: set[str]) -> list[SessionInfo]:
    """Those waiting for a person first, then those of ``cwd``, then the rest; newest first within each."""
    return sorted(sessions, key=lambda s: (not needs_you(s, waiting), s.cwd != cwd))


class SessionsPanel(OptionList):
    """Sessions with their status, model and watermark; Enter (or a click) switches, ``r`` renames, ``x`` archives."""

    BINDINGS = [
        Binding("r", "rename", "Rename"),
        Binding("x", "archive", "Archive"),
    ]

    @dataclass
    class Chosen(Message):
        """The user picked a session."""

        session_id: str

    @dataclass
    class Renamed(Message):
        """The user typed a new title for a session (empty: none)."""

        session_id: str
        title: str

    @dataclass
    class Archived(Message):
        """The user confirmed archiving a session."""

        session_id: str

    def __init__(self) -> None:
        super().__init__(id="sessions")
        self.border_title = "sessions"
        self.sessions: list[SessionInfo] = []
        self._signature: object = None

    def show_sessions(
        self, sessions: list[SessionInfo], *, cwd: str, waiting: set[str] | None = None, current: str | None
    ) -> None:
        """Replace the list, keeping the highlight on the session it was on (or on ``current``).

        Args:
            sessions: as ``list_sessions`` gave them.
            cwd: whose sessions come right after those that need a person.
            waiting: ids of sessions with a pending approval (their status says so too; this covers a face
                that predates ``status``).
            current: the session shown in the conversation.
        """
        waiting = waiting or set()
        ordered = order_sessions(sessions, cwd, waiting)
        signature = ([s.model_dump() for s in ordered], sorted(waiting), current)
        if signature == self._signature:
            return  # nothing changed: no redraw
        self._signature = signature
        keep = self.highlighted_option.id if self.highlighted_option is not None else current
        self.sessions = ordered
        urgent = [s for s in ordered if needs_you(s, waiting)]
        options: list[Option | None] = []
        if urgent:
            options.append(Option(Text(NEEDS_YOU_HEADER, style="bold yellow"), disabled=True))
            options += [self._option(s, current, waiting) for s in urgent]
            if len(urgent) < len(ordered):
                options.append(None)  # a rule between those that need you and the rest
        options += [self._option(s, current, waiting) for s in ordered[len(urgent) :]]
        self.clear_options()
        self.add_options(options)
        if keep is not None and keep in {s.session_id for s in ordered}:
            self.highlighted = self.get_option_index(keep)
        elif urgent:
            self.highlighted = 1  # the first session, not the header

    def session(self, session_id: str) -> SessionInfo | None:
        """The listed session with this id."""
        return next((s for s in self.sessions if s.session_id == session_id), None)

    def _option(self, session: SessionInfo, current: str | None, waiting: set[str]) -> Option:
        return Option(label(session, current=session.session_id == current, waiting=waiting), session.session_id)

    # -- keys ---------------------------------------------------------------------------------------

    def _highlighted(self) -> SessionInfo | None:
        option = self.highlighted_option
        return None if option is None or option.id is None else self.session(option.id)

    def action_rename(self) -> None:
        """Ask for the highlighted session's new title."""
        session = self._highlighted()
        if session is None:
            return
        sid = session.session_id

        def done(title: str | None) -> None:
            if title is not None and clean_title(title) != session.title:
                self.post_message(self.Renamed(sid, title))

        self.app.push_screen(RenameDialog(short_id(sid), clean_title(session.title)), done)

    def action_archive(self) -> None:
        """Archive the highlighted session, once the user says yes."""
        session = self._highlighted()
        if session is None:
            return
        sid = session.session_id

        def done(archive: bool | None) -> None:
            if archive:
                self.post_message(self.Archived(sid))

        self.app.push_screen(ConfirmArchive(name_of(session)), done)

    @on(OptionList.OptionSelected)
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option.id is not None:
            self.post_message(self.Chosen(event.option.id))


def short_id(session_id: str) -> str:
    """The first eight characters of a session's id after ``s_``: enough to tell sessions apart in a list."""
    return session_id.removeprefix("s_")[:8]


def name_of(session: SessionInfo) -> str:
    """Its title (cleaned: a title is anyone's text), else its short id."""
    return clean_title(session.title) or short_id(session.session_id)


def label(session: SessionInfo, *, current: bool = False, waiting: set[str] | None = None) -> Text:
    """Two lines: the name; then the status, model and watermark (dim), each cut to the panel."""
    line = Text("▶ " if current else "  ", style="bold")
    line.append(name_of(session), style="bold" if current else "")
    line.truncate(LABEL_WIDTH, overflow="ellipsis")
    status = session.status
    if session.session_id in (waiting or set()) and status not in NEEDS_YOU:
        status = "awaiting_approval"
    word, style = _STATUS.get(status, (status, ""))
    details = Text("  ")
    details.append(word, style=style)
    if session.context_ratio is not None:  # before the model: a long model name is what gets cut
        details.append(f" {session.context_ratio:.0%}", style="dim")
    model = session.model.split(":", 1)[-1].rsplit("/", 1)[-1]
    details.append(f" {model}", style="dim")
    details.truncate(LABEL_WIDTH, overflow="ellipsis")
    return line + Text("\n") + details
