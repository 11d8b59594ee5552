"""A tool call waiting for a person: approve once, approve for the session, or deny with a reason."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Input, Static

from clients.tui.diff_view import file_change, render_diff
from clients.tui.text import short_arguments

__all__ = ["ApprovalCard"]

CARD_DIFF_LINES = 16
"""Diff lines a card shows (the tool block above it has the whole diff, Enter on it)."""

_DECIDED = {"approve_once": "approved once", "approve_session": "approved for the session", "deny": "denied"}


class ApprovalCard(Widget, can_focus=True):
    """The card for one approval; any client may decide it, and the card says who did.

    | Key | Does |
    | --- | --- |
    | `a` | approve once |
    | `s` | approve this tool for the rest of the session |
    | `d` | deny: type a reason (the model sees it), Enter sends, Escape goes back |
    """

    BINDINGS = [
        Binding("a", "decide('approve_once')", "Approve once"),
        Binding("s", "decide('approve_session')", "Approve for session"),
        Binding("d", "deny", "Deny…"),
    ]

    @dataclass
    class Decided(Message):
        """The user decided here; the app sends it to the face (the card waits for the stored decision)."""

        card: ApprovalCard
        approval_id: str
        decision: str
        reason: str = ""

    def __init__(
        self, *, approval_id: str, tool: str, arguments: dict[str, Any], reason: str, kind: str = "policy"
    ) -> None:
        super().__init__()
        self.approval_id = approval_id
        self.tool = tool
        self.arguments = arguments
        self.reason = reason
        self.kind = kind
        self.decision: str | None = None
        self.decided_by = ""
        self.deny_reason = ""
        self.sending = False

    def compose(self) -> ComposeResult:
        """What is asked, and the reason input (shown once the user chose to deny)."""
        yield Static(self._content(), classes="body")
        yield Input(placeholder="why not? (Enter denies, Escape goes back)", classes="reason")

    @property
    def pending(self) -> bool:
        """No decision is stored yet."""
        return self.decision is None

    def action_decide(self, decision: str, reason: str = "") -> None:
        """Decide here (ignored once decided, or while a decision is on its way)."""
        if not self.pending or self.sending:
            return
        self.sending = True
        self._refresh_body()
        self.post_message(self.Decided(self, self.approval_id, decision, reason))

    def action_deny(self) -> None:
        """Ask for the reason to give the model."""
        if self.pending and not self.sending:
            self.add_class("-asking")
            self.query_one(Input).focus()

    @on(Input.Submitted)
    def _reason_given(self, event: Input.Submitted) -> None:
        event.stop()
        self.remove_class("-asking")
        self.focus()
        self.action_decide("deny", event.value.strip())

    def _key_escape(self) -> None:
        if self.has_class("-asking"):
            self.remove_class("-asking")
            self.focus()

    def failed(self, error: str) -> None:
        """Sending the decision failed (another client decided first, or the daemon is gone)."""
        self.sending = False
        self.app.notify(error, severity="warning")
        self._refresh_body()

    def resolve(self, decision: str, decided_by: str, reason: str = "") -> None:
        """The stored decision (from this client or another): the card says what it was and who gave it."""
        self.decision, self.decided_by, self.sending = decision, decided_by, False
        self.deny_reason = reason
        self.remove_class("-asking")
        self.add_class("-decided", "-denied" if decision == "deny" else "-approved")
        self._refresh_body()

    def _refresh_body(self) -> None:
        if self.is_mounted:
            self.query_one(".body", Static).update(self._content())

    def _content(self) -> Text:
        title = "Review: run again?" if self.kind == "review" else "Approve?"
        change = file_change(self.tool, self.arguments, None)
        body = Text(f"{title} ", style="bold")
        body.append(self.tool, style="bold")
        # a file change is shown as its diff, so that what is approved is what is seen
        body.append(" " + (change.path if change else short_arguments(self.arguments, 120)), style="dim")
        if change is not None and self.decision is None:
            body.append("\n")
            body.append_text(render_diff(change, CARD_DIFF_LINES))
        body.append("\n" + self.reason, style="italic")
        if self.decision is not None:
            by = f" by {self.decided_by}" if self.decided_by else ""
            body.append(f"\n{_DECIDED.get(self.decision, self.decision)}{by}", style="bold")
            if self.deny_reason:
                body.append(f": {self.deny_reason}")
        elif self.sending:
            body.append("\nsending…", style="dim")
        else:
            body.append("\n[a] approve once  [s] approve for session  [d] deny", style="bold")
        return body
