"""A server's question (MCP elicitation) as a card: the form it asks for, or the URL it sends the user to.

Everything on the card comes from an external server (its name, its message, its schema's names, titles, enum
values, its URL), so all of it is made safe to print first: control and bidi characters never reach the terminal.
The answer goes to the face through the app's client (``answer_question``, as any client answers); the face checks
it against the schema, and a refusal is shown on the card, which stays open. Whoever answers first wins: when
another client does, the card becomes a line saying who.
"""

from __future__ import annotations

from typing import Any

import anyio
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widget import Widget
from textual.widgets import Checkbox, Input, Label, Select, Static

from clients.server_rows import plain
from clients.tui.child_block import child_name
from clients.tui.connection import DECIDED_BY
from clients.tui.prompt import Prompt

__all__ = ["QuestionCard"]

ANSWER_TIMEOUT_S = 15.0
"""How long sending an answer may take before the card says it was not sent (the face answers at once)."""
MAX_FIELDS = 20
"""Fields a card shows; a schema with more is still shown, the rest named as left out (the face refuses gaps)."""
MESSAGE_LINES = 12
_DONE = {"accept": "accepted", "decline": "declined", "cancel": "cancelled"}

Field = tuple[str, dict[str, Any], Widget]
"""A property's name as the server spelled it (what the answer is keyed by), its schema, and its input."""


def safe_lines(text: str, limit: int = MESSAGE_LINES) -> str:
    """``text`` with its line breaks kept but each line made safe to print, at most ``limit`` lines."""
    lines = [plain(line, 300) for line in text.splitlines()]
    kept = [line for line in lines if line][:limit]
    more = len([line for line in lines if line]) - len(kept)
    return "\n".join(kept) + (f"\n… ({more} more lines)" if more > 0 else "")


def _choices(schema: dict[str, Any]) -> list[tuple[str, Any]] | None:
    """An enum's (label, value) pairs: ``enum`` (with ``enumNames``) or ``oneOf`` of ``const``/``title``; else None."""
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        names = schema.get("enumNames")
        labels = names if isinstance(names, list) and len(names) == len(enum) else enum
        return [(plain(str(label), 80) or repr(value), value) for label, value in zip(labels, enum, strict=True)]
    one_of = schema.get("oneOf")
    if isinstance(one_of, list) and one_of and all(isinstance(o, dict) and "const" in o for o in one_of):
        return [(plain(str(o.get("title", o["const"])), 80) or repr(o["const"]), o["const"]) for o in one_of]
    return None


def _number(text: str) -> int | float | str:
    """What was typed in a number field as a number (as typed, if it is none: the face says what is wrong)."""
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


class QuestionCard(Widget, can_focus=True):
    """The card for one server's question; any client may answer it, and the card says who did.

    | Key | Does |
    | --- | --- |
    | Enter | accept: send what the fields say (url mode: you went to the URL) |
    | `d` | decline (on the card, not while typing in a field) |
    | `c` / Escape | cancel: tell the server the question was dismissed |
    """

    BINDINGS = [
        Binding("enter", "answer('accept')", "Accept"),
        Binding("d", "answer('decline')", "Decline"),
        Binding("c", "answer('cancel')", "Cancel"),
        Binding("escape", "answer('cancel')", "Cancel", show=False),
    ]

    def __init__(
        self,
        *,
        question_id: str,
        server: str,
        message: str,
        requested_schema: dict[str, Any],
        mode: str = "form",
        url: str = "",
        child_session_id: str = "",
        child_agent: str = "",
    ) -> None:
        super().__init__()
        self.question_id = question_id
        self.server = server
        self.message = message
        self.requested_schema = requested_schema
        self.mode = mode
        self.url = url
        self.child_session_id = child_session_id
        """Set when a child session's server asked (it came up this session's stream): answered the same, by id."""
        self.child_agent = child_agent
        self.action: str | None = None
        self.answered_by = ""
        self.reason = ""
        self.error = ""
        """The face's refusal of the last answer sent from here (the card stays open), or why it was not sent."""
        self.sending = False
        self._fields: list[Field] = []

    # -- what it shows ------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        """What is asked, an input per field of the form, and the face's refusal (if any)."""
        yield Static(self._head(), classes="body")
        self._fields = []
        with Vertical(classes="fields"):
            if self.mode == "form":
                yield from self._form()
        yield Static("", classes="error")
        yield Static(self._foot(), classes="keys")

    def _form(self) -> ComposeResult:
        properties = self.requested_schema.get("properties")
        if not isinstance(properties, dict):
            return
        required = self.requested_schema.get("required")
        needed = set(required) if isinstance(required, list) else set()
        for name, schema in list(properties.items())[:MAX_FIELDS]:
            prop = schema if isinstance(schema, dict) else {}
            yield Label(self._label(str(name), prop, name in needed), classes="field-label")
            widget = self._input(prop)
            self._fields.append((str(name), prop, widget))
            yield widget
        if len(properties) > MAX_FIELDS:
            yield Label(f"({len(properties) - MAX_FIELDS} more fields not shown)", classes="field-label")

    @staticmethod
    def _label(name: str, schema: dict[str, Any], required: bool) -> Text:
        label = Text(plain(str(schema.get("title") or name), 60) or "(unnamed)", style="bold")
        if required:
            label.append(" *", style="bold red")
        kind = schema.get("type")
        if isinstance(kind, str) and _choices(schema) is None:
            label.append(f" ({plain(kind, 20)})", style="dim")
        description = schema.get("description")
        if isinstance(description, str) and description:
            label.append(f"  {plain(description, 160)}", style="dim italic")
        return label

    @staticmethod
    def _input(schema: dict[str, Any]) -> Widget:
        default = schema.get("default")
        choices = _choices(schema)
        if choices is not None:
            values = [value for _, value in choices]
            return Select(choices, prompt="choose…", value=default if default in values else Select.NULL, compact=True)
        kind = schema.get("type")
        if kind == "boolean":
            return Checkbox("yes", value=default is True, compact=True)
        text = "" if default is None or isinstance(default, dict | list) else plain(str(default), 500)
        if kind in ("integer", "number"):
            return Input(value=text, type=kind, placeholder=kind, compact=True)
        hint = "text, separated by commas" if kind == "array" else "text"
        return Input(value=text, placeholder=hint, compact=True)

    def _head(self) -> Text:
        head = Text("Question ", style="bold")
        if self.child_session_id:
            head.append(f"from child {child_name(self.child_agent, self.child_session_id)}'s server ", style="bold")
        else:
            head.append("from server ", style="bold")
        head.append(plain(self.server, 100) or "(unnamed)", style="bold")
        if self.action is not None:
            head.append(f": {plain(self.message, 120)}", style="dim")
            return head
        head.append("\n" + safe_lines(self.message))
        if self.mode == "url":
            head.append("\nIt asks you to go to ", style="italic")
            head.append(plain(self.url, 500), style="bold underline")
            head.append(" (open it yourself; Loom does not), then accept.", style="italic")
        return head

    def _foot(self) -> Text:
        if self.action is not None:
            by = f" by {plain(self.answered_by, 100)}" if self.answered_by else ""
            foot = Text(f"{_DONE.get(self.action, self.action)}{by}", style="bold")
            if self.reason:
                foot.append(f": {plain(self.reason, 300)}")
            return foot
        if self.sending:
            return Text("sending…", style="dim")
        accept = "I went there" if self.mode == "url" else "send"
        keys = f"[Enter] accept ({accept})  [d] decline  [c/Esc] cancel"
        return Text(keys + ("  (* required)" if self._needs_some() else ""), style="bold")

    def _needs_some(self) -> bool:
        required = self.requested_schema.get("required")
        return self.mode == "form" and isinstance(required, list) and bool(required)

    @property
    def text(self) -> str:
        """What the card says now, as plain text: the question, its fields, the keys or who answered, any refusal."""
        parts = [self._head().plain]
        if self.action is None:
            parts += [self._label(n, s, n in (self.requested_schema.get("required") or [])).plain for n, s, _ in
                      self._fields]  # fmt: skip
        if self.error:
            parts.append(self.error)
        parts.append(self._foot().plain)
        return "\n".join(parts)

    @property
    def pending(self) -> bool:
        """Nobody answered yet."""
        return self.action is None

    def on_mount(self) -> None:
        """Take the keys when the user is not writing a message (as an approval card does)."""
        self._refresh()
        focused = self.app.focused
        if self.pending and (focused is None or (isinstance(focused, Prompt) and not focused.text)):
            first = next((w for _, _, w in self._fields), None)
            (first or self).focus()
            self.scroll_visible()

    # -- answering ----------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Keys answer only while the question is open and no answer is on its way."""
        if action == "answer":
            return self.pending and not self.sending
        return True

    @on(Input.Submitted)
    def _field_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_answer("accept")

    def content(self) -> dict[str, Any]:
        """What the fields say, as the answer's content: an empty text field is left out (not given)."""
        content: dict[str, Any] = {}
        for name, schema, widget in self._fields:
            if isinstance(widget, Checkbox):
                content[name] = widget.value
            elif isinstance(widget, Select):
                if widget.value is not Select.NULL:
                    content[name] = widget.value
            elif isinstance(widget, Input) and widget.value.strip():
                typed = widget.value.strip()
                kind = schema.get("type")
                if kind in ("integer", "number"):
                    content[name] = _number(typed)
                elif kind == "array":
                    content[name] = [part.strip() for part in typed.split(",") if part.strip()]
                else:
                    content[name] = widget.value
        return content

    def action_answer(self, action: str) -> None:
        """Send ``accept`` (with the fields' content in form mode), ``decline`` or ``cancel`` to the face."""
        if not self.pending or self.sending:
            return
        loom = getattr(self.app, "loom", None)
        if loom is None:
            self.refused("not sent: not connected to the daemon")
            return
        content = self.content() if action == "accept" and self.mode == "form" else None
        self.sending, self.error = True, ""
        self._refresh()
        # A worker, so that the loop never waits on the daemon; the answer is the card's own business.
        self.run_worker(self._send(loom, action, content), group="answer", exclusive=True, exit_on_error=False)

    async def _send(self, loom: Any, action: str, content: dict[str, Any] | None) -> None:
        try:
            with anyio.fail_after(ANSWER_TIMEOUT_S):
                info = await loom.answer_question(self.question_id, action, content, answered_by=DECIDED_BY)
        except TimeoutError:
            self.refused(f"not sent: the daemon did not answer within {ANSWER_TIMEOUT_S:g} s")
        except Exception as exc:  # the face's refusal (FaceError), or a broken link: either way the card stays open
            self.refused(str(exc) or type(exc).__name__)
        else:
            self.resolve(info.action or action, info.answered_by or DECIDED_BY, info.reason)

    def refused(self, error: str) -> None:
        """The answer was not taken (the face's reason, in its words): say so; the question stays open."""
        self.sending, self.error = False, plain(error, 600)
        self._refresh()

    def resolve(self, action: str, answered_by: str, reason: str = "") -> None:
        """The stored answer (from here or another client): the card becomes a line saying what and who."""
        had_focus = self.has_focus or any(w.has_focus for _, _, w in self._fields)
        self.action, self.answered_by, self.reason = action, answered_by, reason
        self.sending, self.error = False, ""
        self.add_class("-answered")
        self._refresh()
        if had_focus and self.is_mounted:
            prompts = self.screen.query(Prompt)
            if prompts:
                prompts.first().focus()

    def _refresh(self) -> None:
        if not self.is_mounted:
            return
        self.query_one(".body", Static).update(self._head())
        self.query_one(".keys", Static).update(self._foot())
        self.query_one(".error", Static).update(Text(self.error, style="bold red"))
        self.set_class(bool(self.error), "-refused")
