"""The protocol of Loom's face: what its tools return, and the events they carry.

Both sides import this module: the face (:mod:`orchestrator.face`) builds its results from these models, and
the client library (:mod:`clients.loom`) reads them back typed. The events themselves are
:mod:`orchestrator.events`, re-exported here; ``docs/protocol.md`` is generated from both
(``python -m orchestrator.face.protocol_doc``). Only pydantic is imported, so a client pays for nothing else.
"""

from __future__ import annotations

import typing
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, WithJsonSchema

from orchestrator.events import EVENT_ADAPTER, Event, ToolProgress
from orchestrator.events_long import TodoItem

__all__ = [
    "DRIVING_CLIENT_META",
    "EVENT_ADAPTER",
    "EVENT_ITEM_SCHEMA",
    "EVENT_TYPES",
    "FINAL_STATUSES",
    "MAX_SEQ",
    "MAX_WAIT_S",
    "ApprovalAnswer",
    "ApprovalInfo",
    "ApprovalList",
    "CheckpointInfo",
    "CheckpointList",
    "CompactionInfo",
    "Event",
    "EventPage",
    "FileRestoreInfo",
    "LiveInfo",
    "LiveToolCallInfo",
    "ModelSwitchInfo",
    "RewindInfo",
    "RunInfo",
    "SessionInfo",
    "STORE_FAILURE",
    "SessionList",
]

MAX_WAIT_S = 60.0
"""No face call blocks longer than this; call again to keep waiting."""

MAX_RUN_S = 7 * 24 * 3600.0
"""The longest ``timeout_s`` a run may be given (a week): longer is a mistake in units, not a deadline."""

MAX_SEQ = 2**63 - 1
"""The largest seq a cursor may name (the store's integers are 64-bit): a larger one is refused as bad input."""

FINAL_STATUSES = frozenset({"completed", "failed", "cancelled", "interrupted", "needs_review"})
"""Statuses a run waited on with ``get_run`` stops at (a resumed run is ``needs_review`` only while it waits
for a review, or at its end when nobody could give one)."""

STORE_FAILURE = "store error: "
"""How a failed run's ``reason`` starts when Loom's database failed (a full disk, say); the rest says why."""

DRIVING_CLIENT_META = "loom/driving-client"
"""The ``_meta`` key ``loom mcp`` sets on every call it forwards: the ``clientInfo`` name of the client
driving it (Claude Code, Codex...), so that the daemon records approvals as decided by that client rather
than by ``loom mcp``."""


# -- sessions, runs and approvals --------------------------------------------------------------


class SessionInfo(BaseModel):
    """A session: its id is the handle for every other call."""

    session_id: str
    cwd: str
    model: str
    mode: str
    archived: bool
    last_seq: int
    """The newest event's seq; read_events(after_seq=last_seq) waits for what comes next."""
    state: str = "idle"
    """``active`` (a run is in progress), ``idle`` or ``archived``; ``status`` says more."""
    status: str = "idle"
    """What the session needs, most urgent first: ``archived``; ``needs_review`` (a resumed run asks what to do
    about a call Loom's interruption left unfinished) or ``awaiting_approval`` (a call waits for a decision), the
    two that wait for a person; ``running``; ``failed`` or ``interrupted`` (its last run did); else ``idle``."""
    title: str = ""
    """A person's name for the session (rename_session); empty until one is given. At most 80 characters, one
    line, no control characters."""
    context_used: int | None = None
    """Tokens the model's context held after its last call (or compaction); null before the first."""
    context_window: int | None = None
    """The model's context window in tokens."""
    context_ratio: float | None = None
    """The watermark: context_used / context_window. Past the model's threshold (0.8 by default) the session
    compacts before its next model call; compact_session does it on request."""
    parent_session_id: str = ""
    """For a child session (started by a subagents tool or create_session with a parent): the session that
    started it. Empty for a top-level session; list_sessions gives the whole tree this way."""
    parent_run_id: str = ""
    """The parent's run that started the child."""
    agent: str = ""
    """The agent definition the child runs as (empty: none)."""
    todos: list[TodoItem] = Field(default_factory=list[TodoItem])
    """The model's plan (its ``todo`` tool) as it now stands, in order: each item's text and status (``pending``,
    ``in_progress``, ``completed``). Only get_session fills it; list_sessions and the other tools that answer with
    a session leave it empty. Each change is a ``todo_updated`` event on the session's stream."""


class SessionList(BaseModel):
    """Sessions, newest first."""

    sessions: list[SessionInfo]


class RunInfo(BaseModel):
    """Where a run is. ``final_text`` is the answer once ``status`` is completed."""

    run_id: str
    session_id: str
    status: str
    """queued (behind another run of the session), running, awaiting_approval, needs_review, completed, failed,
    cancelled or interrupted.

    interrupted and needs_review runs can be continued with resume_run; a running run is needs_review while
    it waits for a decision about a call that Loom's interruption left unfinished."""
    reason: str = ""
    final_text: str = ""
    pending_approvals: list[str] = Field(default_factory=list)
    """Ids to pass to decide_approval while the run waits for one."""


class ApprovalInfo(BaseModel):
    """A tool call waiting for (or given) a decision."""

    approval_id: str
    session_id: str
    run_id: str
    tool: str
    arguments: dict[str, Any]
    reason: str
    kind: str = "policy"
    """``policy`` (approve runs the call) or ``review`` (a resumed run's unfinished call: approve runs it
    again, deny skips it)."""
    decision: str | None = None
    decided_by: str = ""
    child_session_id: str = ""
    """Set when the waiting call is a descendant's (a child session's): that session. ``session_id`` is then the
    session the list was asked about, and deciding ``approval_id`` answers the child's call."""


class ApprovalAnswer(BaseModel):
    """What a person answers when asked through elicitation."""

    decision: Literal["approve_once", "approve_session", "deny"]
    reason: str = ""


class ApprovalList(BaseModel):
    """Pending approvals, oldest first."""

    approvals: list[ApprovalInfo]


# -- events and the text in flight ---------------------------------------------------------------

EVENT_TYPES: tuple[str, ...] = tuple(
    str(member.model_fields["type"].default) for member in typing.get_args(typing.get_args(Event)[0])
)
"""Every event ``type``, in the order of the union."""

EVENT_ITEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": (
        "One event of the session's log. `type` names its kind; its other fields are that kind's "
        "(docs/protocol.md, generated from orchestrator/events.py)."
    ),
    "required": ["type", "session_id", "ts"],
    "properties": {
        "type": {"enum": list(EVENT_TYPES)},
        "seq": {"type": ["integer", "null"]},
        "session_id": {"type": "string"},
        "ts": {"type": "number"},
    },
}
"""What the output schema says of each event: the kinds and the common fields, not every kind's fields.

The whole union as JSON Schema is 22 KB, and a client checks every result against the schema it was
given: with the full union (a ``oneOf`` of 21 kinds) that took 300 ms for a page of 200 events in the
MCP SDK's client, against 9 ms with this. The events are still the union's models on our side.
"""


class LiveToolCallInfo(BaseModel):
    """A tool call of the step in flight, as far as the model has streamed it."""

    index: int
    """The call's position among the step's calls."""
    call_id: str = ""
    name: str = ""
    arguments_so_far: str
    """The arguments' JSON text so far; the stored assistant_message has the whole call."""


class LiveInfo(BaseModel):
    """The model step in flight as of ``next_after_seq``: what it streamed that no stored event holds yet."""

    cursor: str
    """Pass it back as ``live_cursor``: the next call sends only what is new, and its wait ends when there is."""
    run_id: str
    step: int
    after_seq: int
    """With ``run_id`` and ``step``, names this attempt of the step: a retried model call starts again from
    nothing under a new ``after_seq`` (the seq of its ``model_retry``)."""
    text_offset: int = 0
    """Where ``text`` starts in the step's text so far: 0, or how much ``live_cursor`` said you hold."""
    text: str
    tool_calls: list[LiveToolCallInfo] = Field(default_factory=list[LiveToolCallInfo])


class EventPage(BaseModel):
    """Stored events after a cursor; pass ``next_after_seq`` back to continue with no gap or duplicate."""

    session_id: str
    events: list[Annotated[Event, WithJsonSchema(EVENT_ITEM_SCHEMA)]]
    """In seq order; each has the fields of its ``type`` (docs/protocol.md lists them)."""
    next_after_seq: int
    """The last event's seq (``after_seq`` when there is none): where reading forward continues."""
    live: LiveInfo | None = None
    """The step in flight (null when nothing streams, the page stops short of the newest event, or it was read
    with ``before_seq``)."""
    progress: list[ToolProgress] = Field(default_factory=list[ToolProgress])
    """The tool calls in flight that reported progress: the latest report of each (live only, never in ``events``;
    a page's wait also ends when one changes)."""
    more_before: bool = False
    """Read with ``before_seq``: events older than this page's first (and newer than ``after_seq``) remain; pass
    its first event's seq as the next ``before_seq`` to read them. Always false for a page read forward."""


# -- context and rewind ----------------------------------------------------------------------------


class CompactionInfo(BaseModel):
    """What a compaction did (or, for a preview, would do), in estimated tokens of the next request."""

    session_id: str
    status: str
    """``compacted``, ``failed`` (the history was kept as it is; ``detail`` says why), ``nothing_to_compact``
    or ``preview`` (nothing changed; ``tokens_after`` is an estimate)."""
    tokens_before: int
    tokens_after: int
    window: int
    detail: str = ""
    dropped_messages: int = 0
    dropped_tool_calls: int = 0
    summary: str = ""
    """The summary that now stands for the dropped history (``compacted`` only)."""


class ModelSwitchInfo(BaseModel):
    """The session's model after a switch, and the compaction that made room for it, if one was needed."""

    session_id: str
    model: str
    previous: str
    window: int
    compaction: CompactionInfo | None = None


class CheckpointInfo(BaseModel):
    """A point to rewind to: just before this run."""

    run_id: str
    started: float
    prompt: str
    files_changed: list[str]
    """Files Loom's fs tools changed during the run (what rewinding to it or earlier restores)."""


class CheckpointList(BaseModel):
    """A session's checkpoints, oldest first."""

    session_id: str
    checkpoints: list[CheckpointInfo]


class FileRestoreInfo(BaseModel):
    """What a rewind did to one file: restored, deleted (created since) or recreated (deleted since)."""

    path: str
    action: str


class RewindInfo(BaseModel):
    """What a rewind did; send further messages to ``session_id``, the new branch."""

    session_id: str
    from_session_id: str
    to_run_id: str
    files: list[FileRestoreInfo]
    not_rewound: list[str]
    """Calls since the checkpoint whose effects Loom cannot undo (shell commands, other servers' tools)."""
