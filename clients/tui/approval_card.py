"""A tool call waiting for a person: approve once, approve for the session, or deny with a reason.

A *review* (a side-effecting call that was in progress when Loom stopped, asked about when its run resumes) has
its own three answers: run it again, skip it with a note for the model, or stop the run.
"""

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

from clients.tui.child_block import child_name
from clients.tui.diff_view import file_change, render_diff
from clients.tui.text import short_arguments

__all__ = ["ApprovalCard"]

CARD_DIFF_LINES = 16
"""Diff lines a card shows (the tool block above it has the whole diff, Enter on it)."""

_DECIDED = {
    "approve_once": "approved once",
    "approve_session": "approved for the session",
    "deny": "denied",
    "expired": "not decided",
}


class ApprovalCard(Widget, can_focus=True):
    """The card for one approval; any client may decide it, and the card says who did.

    | Key | Does |
    | --- | --- |
    | `a` | approve once |
    | `s` | approve this tool for the rest of the session |
    | `d` | deny: type a reason (the model sees it), Enter sends, Escape goes back |

    On a review: `r` runs the call again, `k` skips it (type a note for the model, as for a denial), `x` stops
    the run (it is cancelled; nothing is run again).
    """

    BINDINGS = [
        Binding("a", "decide('approve_once')", "Approve once"),
        Binding("s", "decide('approve_session')", "Approve for session"),
        Binding("d", "deny", "Deny…"),
        Binding("r", "decide('approve_once')", "Run again"),
        Binding("k", "deny", "Skip…"),
        Binding("x", "stop_run", "Stop the run"),
    ]
    _REVIEW_ONLY = frozenset({"stop_run"})
    _POLICY_ONLY = frozenset({"approve_session"})

    @dataclass
    class Decided(Message):
        """The user decided here; the app sends it to the face (the card waits for the stored decision)."""

        card: ApprovalCard
        approval_id: str
        decision: str
        reason: str = ""

    @dataclass
    class StopRun(Message):
        """On a review, the user chose to stop the run rather than answer: the app cancels it."""

        card: ApprovalCard
        run_id: str

    def __init__(
        self,
        *,
        approval_id: str,
        tool: str,
        arguments: dict[str, Any],
        reason: str,
        kind: str = "policy",
        run_id: str = "",
        child_session_id: str = "",
        child_agent: str = "",
    ) -> None:
        super().__init__()
        self.approval_id = approval_id
        self.run_id = run_id
        self.tool = tool
        self.arguments = arguments
        self.reason = reason
        self.kind = kind
        self.child_session_id = child_session_id
        """Set when the call is a child session's (the approval came up its parent's stream): whose call it is."""
        self.child_agent = child_agent
        self.decision: str | None = None
        self.decided_by = ""
        self.deny_reason = ""
        self.sending = False

    def compose(self) -> ComposeResult:
        """What is asked, and the reason input (shown once the user chose to deny)."""
        yield Static(self._content(), classes="body")
        hint = "a note for the model: why skip it? (Enter skips" if self.kind == "review" else "why not? (Enter denies"
        yield Input(placeholder=f"{hint}, Escape goes back)", classes="reason")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Each kind of card answers only to its own keys (a review has no "for the session", a policy card no stop)."""
        review = self.kind == "review"
        if action == "decide" and parameters:
            # `a`/`r` both approve once; `s` (approve for the session) belongs to policy cards
            return not (review and parameters[0] == "approve_session")
        if action in self._REVIEW_ONLY:
            return review
        return True

    @property
    def text(self) -> str:
        """What the card says now, as plain text (what is asked, the keys or the decision and who made it)."""
        return self._content().plain

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

    def action_stop_run(self) -> None:
        """A review only: stop the run instead of answering (the app cancels it; the card shows the outcome)."""
        if self.kind == "review" and self.pending and not self.sending and self.run_id:
            self.sending = True
            self._refresh_body()
            self.post_message(self.StopRun(self, self.run_id))

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

    def expire(self, run_status: str) -> None:
        """The run ended with this still undecided (cancelled, say): nothing waits for an answer any more."""
        if self.pending:
            self.decision, self.decided_by, self.sending = "expired", "", False
            self.deny_reason = f"the run ended {run_status} first"
            self.remove_class("-asking")
            self.add_class("-decided")
            self._refresh_body()

    def _refresh_body(self) -> None:
        if self.is_mounted:
            self.query_one(".body", Static).update(self._content())

    def _content(self) -> Text:
        title = "Review: run again?" if self.kind == "review" else "Approve?"
        change = file_change(self.tool, self.arguments, None)
        body = Text(f"{title} ", style="bold")
        if self.child_session_id:  # answering is the same (by approval id); whose call it is must be plain
            body.append(f"child {child_name(self.child_agent, self.child_session_id)} wants to run ", style="bold")
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
        elif self.kind == "review":
            body.append("\n[r] run it again  [k] skip it (with a note)  [x] stop the run", style="bold")
        else:
            body.append("\n[a] approve once  [s] approve for session  [d] deny", style="bold")
        return body
