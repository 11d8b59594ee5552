"""The side panel: every session, those waiting for a person first ("needs you"), then the current directory's.

Each entry shows the session's title (or its id), its status, model and watermark, all from ``list_sessions``;
child sessions sit under the session that started them, named by their agent (:mod:`clients.tui.session_tree`),
and Space (or Left / Right) closes and opens a branch. ``r`` renames the highlighted session and ``x`` archives it
(after a yes/no); the panel only asks, and the app makes the calls, as for everything else it sends the daemon.
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
from clients.tui.session_tree import TreeRow, session_tree
from orchestrator.protocol import SessionInfo
from orchestrator.store.session_view import NEEDS_YOU, clean_title

__all__ = ["NEEDS_YOU_HEADER", "SessionsPanel", "label", "needs_you"]

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


class SessionsPanel(OptionList):
    """Sessions as a tree with their status, model and watermark.

    | Key | Does |
    | --- | --- |
    | Enter, click | show the session |
    | Space / Left / Right | close or open the children under it (Left on a child: its parent) |
    | r / x | rename / archive it |
    """

    BINDINGS = [
        Binding("r", "rename", "Rename"),
        Binding("x", "archive", "Archive"),
        Binding("space", "toggle_branch", "Children", show=False),
        Binding("left", "fold(False)", "Close", show=False),
        Binding("right", "fold(True)", "Open", show=False),
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
        self._rows: list[TreeRow] = []
        self._opened: dict[str, bool] = {}
        """The user's choice per branch (open or closed); the rest follow :func:`session_tree`'s defaults."""
        self._shown: tuple[str, set[str], str | None] = ("", set(), None)
        """What the last list was shown with (cwd, waiting, current), to redraw it when a branch opens or closes."""

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
        self._shown = (cwd, waiting, current)
        rows = session_tree(sessions, cwd=cwd, waiting=waiting, opened=self._opened, current=current)
        for row in rows:  # a branch shown open stays open (until closed) when what opened it is over
            if row.expanded:
                self._opened.setdefault(row.session.session_id, True)
        signature = ([s.model_dump() for s in sessions], sorted(waiting), current, [_row_key(r) for r in rows])
        if signature == self._signature:
            return  # nothing changed: no redraw
        self._signature = signature
        keep = self.highlighted_option.id if self.highlighted_option is not None else current
        self.sessions = list(sessions)
        self._rows = rows
        # rows come with the branches that wait for a person first: those go under the "needs you" header
        calm = next((i for i, r in enumerate(rows) if r.depth == 0 and not r.urgent), len(rows))
        urgent = rows[:calm]
        options: list[Option | None] = []
        if urgent:
            options.append(Option(Text(NEEDS_YOU_HEADER, style="bold yellow"), disabled=True))
            options += [self._option(r, current, waiting) for r in urgent]
            if len(urgent) < len(rows):
                options.append(None)  # a rule between those that need you and the rest
        options += [self._option(r, current, waiting) for r in rows[len(urgent) :]]
        self.clear_options()
        self.add_options(options)
        shown = {r.session.session_id for r in rows}
        while keep is not None and keep not in shown:  # in a closed branch: its nearest shown ancestor
            above = self.session(keep)
            keep = above.parent_session_id if above is not None and above.parent_session_id else None
        if keep is not None:
            self.highlighted = self.get_option_index(keep)
        elif urgent:
            self.highlighted = 1  # the first session, not the header

    def session(self, session_id: str) -> SessionInfo | None:
        """The listed session with this id."""
        return next((s for s in self.sessions if s.session_id == session_id), None)

    def _option(self, row: TreeRow, current: str | None, waiting: set[str]) -> Option:
        sid = row.session.session_id
        return Option(label(row.session, current=sid == current, waiting=waiting, row=row), sid)

    def _row(self, session_id: str) -> TreeRow | None:
        return next((r for r in self._rows if r.session.session_id == session_id), None)

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

    def action_toggle_branch(self) -> None:
        """Close the highlighted session's branch, or open it."""
        session = self._highlighted()
        row = self._row(session.session_id) if session is not None else None
        if row is not None and row.descendants and not row.pinned:  # what waits for you is never hidden
            self._fold(row.session.session_id, not row.expanded)

    def action_fold(self, opening: bool) -> None:
        """Open (Right) or close (Left) the highlighted branch; Left on a child without one goes to its parent."""
        session = self._highlighted()
        row = self._row(session.session_id) if session is not None else None
        if row is None:
            return
        if row.descendants and row.expanded != opening and not row.pinned:
            self._fold(row.session.session_id, opening)
        elif not opening and row.session.parent_session_id and self._row(row.session.parent_session_id):
            self.highlighted = self.get_option_index(row.session.parent_session_id)

    def _fold(self, session_id: str, opening: bool) -> None:
        self._opened[session_id] = opening
        cwd, waiting, current = self._shown
        self.show_sessions(self.sessions, cwd=cwd, waiting=waiting, current=current)

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


def label(
    session: SessionInfo, *, current: bool = False, waiting: set[str] | None = None, row: TreeRow | None = None
) -> Text:
    """Two lines: the name (a child's under its parent's, by its agent); then the status, model and watermark.

    Each line is cut to the panel. A session with children has ``▾`` (open) or ``▸`` and how many are hidden.
    """
    guide = row.guide if row is not None else ""
    line = Text("▶ " if current else "  ", style="bold")
    line.append(guide, style="dim")
    if row is not None and row.descendants:
        line.append("▾ " if row.expanded else "▸ ", style="bold")
    if session.parent_session_id and session.agent:
        line.append(clean_title(session.agent), style="bold" if current else "")
        title = clean_title(session.title)
        line.append(f" {title or short_id(session.session_id)}", style="dim")
    else:
        line.append(name_of(session), style="bold" if current else "")
    line.truncate(LABEL_WIDTH, overflow="ellipsis")
    status = session.status
    if session.session_id in (waiting or set()) and status not in NEEDS_YOU:
        status = "awaiting_approval"
    word, style = _STATUS.get(status, (status, ""))
    details = Text("  " + " " * len(guide))
    details.append(word, style=style)
    if row is not None and row.descendants and not row.expanded:
        details.append(f" +{row.descendants}", style="bold")
    if session.context_ratio is not None:  # before the model: a long model name is what gets cut
        details.append(f" {session.context_ratio:.0%}", style="dim")
    model = session.model.split(":", 1)[-1].rsplit("/", 1)[-1]
    details.append(f" {model}", style="dim")
    details.truncate(LABEL_WIDTH, overflow="ellipsis")
    return line + Text("\n") + details


def _row_key(row: TreeRow) -> tuple[str, int, bool, int]:
    return row.session.session_id, row.descendants, row.expanded, row.depth
