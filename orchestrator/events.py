"""The event log's vocabulary: one discriminated union of pydantic models.

Every observable thing in a session is an :class:`Event`. Events are numbered per session (``seq``)
by the store when they are appended, and only then published to subscribers. Live-only events
(:class:`TextDelta`, :class:`ToolCallDelta`) are never stored and carry ``seq = None``; their text is
coalesced into the stored :class:`AssistantMessage`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, TypeAdapter

from orchestrator.event_base import _EventBase
from orchestrator.events_long import (
    GoalFinished,
    GoalSessionStarted,
    GoalStarted,
    GoalVerdict,
    HandoffWritten,
    HookRan,
    LoopDetected,
    MemoryArchived,
    TodoUpdated,
)
from orchestrator.messages import Attachment, Message, Usage

RunStatus = Literal[
    "queued", "running", "awaiting_approval", "completed", "failed", "cancelled", "interrupted", "needs_review"
]
"""Where a run is in its life. ``completed``, ``failed`` and ``cancelled`` are final; ``interrupted`` and
``needs_review`` runs may be resumed (``needs_review`` is also shown while a resumed run waits for a review)."""

ApprovalKind = Literal["policy", "review"]
"""Why an approval is asked: policy before a call, or a review of a call an interruption left unfinished."""

FailureKind = Literal[
    "invalid_arguments", "unknown_tool", "server_unavailable", "outcome_unknown", "timed_out", "tool_error", "denied"
]
"""Why a tool call failed, in terms a user (and a retry policy) can act on. ``outcome_unknown``: the server died or
its connection broke while the call was in flight, so its effect may have happened."""


class SessionCreated(_EventBase):
    """A session came into being."""

    type: Literal["session_created"] = "session_created"
    cwd: str
    model: str
    mode: str = "bypass"
    """Policy mode: ``ask``, ``accept-edits``, ``plan`` or ``bypass`` (see docs/permissions.md)."""
    headless: bool = False
    """Nobody answers this session's approvals: calls that policy would ask about are denied."""
    parent_session_id: str = ""
    """For a child session (started by a subagents tool): the session that started it; empty for a top-level one."""
    parent_run_id: str = ""
    """The parent's run that started it (empty when the parent had no run going)."""
    agent: str = ""
    """The agent definition the child was started as (empty: none)."""
    request: dict[str, Any] | None = None
    """What the child asked of its parent's bounds (its narrowing request, see
    :class:`orchestrator.policy.narrowing.ChildRequest`), kept so that a reopened child is bounded the same way."""
    advisor: str = ""
    """The session's own advisor mode (``off``, ``lightweight``, ``full``); empty: as configured."""
    handoff_from: str = ""
    """For a session started from a handoff (``loom handoff``): the session whose handoff it continues."""


class SessionArchived(_EventBase):
    """The session was archived: hidden from lists, kept in the store (Loom never deletes sessions)."""

    type: Literal["session_archived"] = "session_archived"


class RunQueued(_EventBase):
    """A message arrived while the session was busy: its run waits for those ahead of it.

    Stored so that a crash loses no message: a queued run that never started is marked
    ``interrupted`` at the next start, and resuming it runs it from the beginning.
    """

    type: Literal["run_queued"] = "run_queued"
    run_id: str
    text: str
    max_steps: int
    owner: str = ""
    """The process holding the queue (``PID:STARTTIME``)."""


class RunStarted(_EventBase):
    """A run began: the user's message and the model that will answer it."""

    type: Literal["run_started"] = "run_started"
    run_id: str
    model: str
    max_steps: int
    owner: str = ""
    """The process driving the run (``PID:STARTTIME``), so another process never marks it interrupted."""


class UserMessage(_EventBase):
    """A message from the user (or a driving agent)."""

    type: Literal["user_message"] = "user_message"
    run_id: str
    text: str


class Notice(_EventBase):
    """Something the user should know that is not part of the conversation."""

    type: Literal["notice"] = "notice"
    run_id: str | None = None
    level: Literal["info", "warning", "error"] = "info"
    text: str


class TextDelta(_EventBase):
    """A piece of streamed assistant text. Live only: never stored."""

    type: Literal["text_delta"] = "text_delta"
    run_id: str
    step: int
    text: str


class ToolCallDelta(_EventBase):
    """A piece of a tool call's arguments (JSON text, incomplete until the call is) as the model streams them.

    Live only: never stored; the whole call is in the stored :class:`AssistantMessage`.
    """

    type: Literal["tool_call_delta"] = "tool_call_delta"
    run_id: str
    step: int
    index: int
    """The call's position among the step's tool calls."""
    call_id: str = ""
    name: str = ""
    """The call's id and tool, on the first piece (when the provider streams them there)."""
    arguments: str


class ModelRetry(_EventBase):
    """A transient model error; the call will be tried again after ``delay_s``."""

    type: Literal["model_retry"] = "model_retry"
    run_id: str
    step: int
    attempt: int
    delay_s: float
    error: str


class AssistantMessage(_EventBase):
    """The model's complete answer for one step (text and tool calls)."""

    type: Literal["assistant_message"] = "assistant_message"
    run_id: str
    step: int
    message: Message
    stop_reason: str
    usage: Usage
    duration_ms: float


class ToolCallStarted(_EventBase):
    """A tool call was validated and sent to its server."""

    type: Literal["tool_call_started"] = "tool_call_started"
    run_id: str
    step: int
    call_id: str
    tool: str
    arguments: dict[str, Any]


class ToolCallFinished(_EventBase):
    """A tool call ended: its result as the model will see it."""

    type: Literal["tool_call_finished"] = "tool_call_finished"
    run_id: str
    step: int
    call_id: str
    tool: str
    is_error: bool
    failure: FailureKind | None = None
    content: str
    structured: dict[str, Any] | None = None
    duration_ms: float
    attachments: list[Attachment] = Field(default_factory=list)
    """The result's parts that are not text, in order (``content`` has a line for each): an image a model may be
    shown keeps its data, so a reopened session sends the model what the open one did."""


class ApprovalRequested(_EventBase):
    """A tool call waits for a decision; any attached client may give it."""

    type: Literal["approval_requested"] = "approval_requested"
    run_id: str
    approval_id: str
    call_id: str
    tool: str
    arguments: dict[str, Any]
    reason: str
    kind: ApprovalKind = "policy"
    """``policy``: policy asks before a call; ``review``: a resumed run asks whether to run again a call
    that was in progress when Loom was interrupted (approve re-runs it, deny skips it)."""
    child_session_id: str = ""
    """Set on the copy shown on an ancestor's stream: the descendant session whose call waits (``run_id`` is then
    the ancestor's run that started that child). Deciding ``approval_id`` answers the child's call."""


class ApprovalDecided(_EventBase):
    """A pending approval was decided; the first decision wins."""

    type: Literal["approval_decided"] = "approval_decided"
    run_id: str
    approval_id: str
    decision: Literal["approve_once", "approve_session", "deny"]
    reason: str = ""
    decided_by: str
    child_session_id: str = ""
    """As on :class:`ApprovalRequested`: the descendant whose call was decided, on an ancestor's stream."""


class ServerFailed(_EventBase):
    """An MCP server could not be started or stopped answering; its tools now return errors."""

    type: Literal["server_failed"] = "server_failed"
    server: str
    error: str


ServerState = Literal["starting", "ready", "degraded", "failed", "stopped"]
"""Where a supervised MCP server is: ``degraded`` answers but slowly or with errors (a failed health check),
``failed`` does not answer and waits for a restart, ``stopped`` was closed (or is ``disabled`` in its config)."""


class ServerStateChanged(_EventBase):
    """An external MCP server's supervisor saw it change state (with the reason and, for stdio, its stderr tail)."""

    type: Literal["server_state"] = "server_state"
    server: str
    state: ServerState
    reason: str = ""
    stderr_tail: str = ""
    restarts: int = 0
    """How many times this session's supervisor has restarted the server so far."""
    tools: int | None = None
    """How many tools it lists, once ``ready``."""


class ServerLog(_EventBase):
    """A log message an MCP server sent at warning or above (every level goes to the server's log file)."""

    type: Literal["server_log"] = "server_log"
    server: str
    level: str
    logger: str = ""
    message: str


class ToolProgress(_EventBase):
    """A server reported progress on a tool call in flight. Live only: never stored."""

    type: Literal["tool_progress"] = "tool_progress"
    run_id: str
    call_id: str
    tool: str
    progress: float
    total: float | None = None
    message: str = ""


class QuestionAsked(_EventBase):
    """An MCP server asked the user something (elicitation); any attached client may answer it."""

    type: Literal["question_asked"] = "question_asked"
    run_id: str = ""
    question_id: str
    server: str
    message: str
    requested_schema: dict[str, Any] = Field(default_factory=dict)
    """The JSON schema of the answer (form mode); empty in url mode."""
    mode: Literal["form", "url"] = "form"
    url: str = ""
    child_session_id: str = ""
    """Set on the copy shown on an ancestor's stream, as on :class:`ApprovalRequested`."""


class QuestionAnswered(_EventBase):
    """A question was answered, declined or cancelled; the first answer wins."""

    type: Literal["question_answered"] = "question_answered"
    run_id: str = ""
    question_id: str
    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = None
    answered_by: str
    reason: str = ""
    child_session_id: str = ""


class RunResumed(_EventBase):
    """An interrupted run continues under its own id, after step ``after_step``.

    The call lists refer to the tool calls of the run's last assistant message: ``reused`` had
    finished (their stored results are fed back, nothing runs again), ``rerun`` had started but not
    finished and are read-only or idempotent (run again), ``review`` had started but not finished
    and may have side effects (a reviewer decides), ``unstarted`` never started (policy decides again).
    """

    type: Literal["run_resumed"] = "run_resumed"
    run_id: str
    after_step: int
    owner: str = ""
    """The process now driving the run (``PID:STARTTIME``)."""
    reused: list[str] = Field(default_factory=list)
    rerun: list[str] = Field(default_factory=list)
    review: list[str] = Field(default_factory=list)
    unstarted: list[str] = Field(default_factory=list)
    note: str
    """What the model is told about the interruption (next to the tool results, or after the user message)."""


class RunFinished(_EventBase):
    """A run reached a final status."""

    type: Literal["run_finished"] = "run_finished"
    run_id: str
    status: RunStatus
    reason: str
    """Why it ended: ``end_turn``, ``max_steps``, ``cancelled`` or the error message."""
    final_text: str
    steps: int


class ContextWatermark(_EventBase):
    """How full the model's context window is: after every model call, and after a compaction.

    ``used_tokens`` is the provider's reported usage for the last call (input plus output) when it
    reported any, else Loom's estimate (``source``); ``ratio`` is ``used_tokens / window``.
    """

    type: Literal["context_watermark"] = "context_watermark"
    run_id: str | None = None
    step: int = 0
    model: str
    used_tokens: int
    window: int
    ratio: float
    threshold: float
    """Past this ratio the session compacts before its next model call."""
    source: Literal["provider", "estimate"]


CompactionTrigger = Literal["auto", "manual", "model_switch"]
"""Why a compaction ran: the watermark passed the threshold, someone asked, or a smaller model was chosen."""


class ContextCompacted(_EventBase):
    """Older history was replaced, in the model's context, by a checked summary.

    The raw events stay in the store; from now on the context is the summary, then the events from
    ``kept_from_seq`` on.
    """

    type: Literal["context_compacted"] = "context_compacted"
    run_id: str | None = None
    trigger: CompactionTrigger
    focus: str = ""
    summary: str
    instructions: list[str] = Field(default_factory=list)
    """The user's instructions, carried over verbatim (the checks guarantee the summary has them)."""
    kept_from_seq: int
    """The first event still given to the model as it is (an assistant message, so no tool call is cut
    from its result)."""
    dropped_from_seq: int
    dropped_to_seq: int
    """The events (inclusive) whose messages the summary replaces."""
    dropped_messages: int
    dropped_tool_calls: int
    tokens_before: int
    tokens_after: int
    attempts: int = 1


class CompactionFailed(_EventBase):
    """A compaction's summary failed its checks (twice) or could not be written: the history is kept."""

    type: Literal["compaction_failed"] = "compaction_failed"
    run_id: str | None = None
    trigger: CompactionTrigger
    reason: str
    attempts: int
    tokens: int


class ModelSwitched(_EventBase):
    """The session's model changed; later runs use ``model``."""

    type: Literal["model_switched"] = "model_switched"
    model: str
    previous: str
    window: int


class ModeChanged(_EventBase):
    """The session's policy mode changed, by one of the face's clients; the next tool call is decided under ``mode``."""

    type: Literal["mode_changed"] = "mode_changed"
    mode: str
    previous: str
    changed_by: str = ""
    """The client that changed it (``tui``, ``cli``, ``mcp:NAME``)."""


class ChildStarted(_EventBase):
    """A child session's run began (a subagents ``spawn``, or a follow-up sent to a child), on the parent's stream."""

    type: Literal["child_started"] = "child_started"
    run_id: str
    """The parent's run the child works for (empty when none was going)."""
    child_session_id: str
    child_run_id: str
    agent: str = ""
    """The agent definition the child runs as (empty: none)."""
    goal: str
    """The child's brief, cut to :data:`CHILD_TEXT_CHARS` characters."""
    depth: int = 2
    """The child's level in the tree (a top-level session is 1)."""


class ChildActivity(_EventBase):
    """What a running child is doing now (the tool it called), on the parent's stream.

    Stored like any event, so that a client attaching later (or reading back) sees the fan-out as it went; a
    model's history is never made of these.
    """

    type: Literal["child_activity"] = "child_activity"
    run_id: str
    child_session_id: str
    child_run_id: str
    step: int
    tool: str
    """The namespaced tool the child just called."""


class ChildFinished(_EventBase):
    """A child's run reached a final status, on the parent's stream."""

    type: Literal["child_finished"] = "child_finished"
    run_id: str
    child_session_id: str
    child_run_id: str
    status: RunStatus
    reason: str
    steps: int
    elapsed_s: float
    final_text: str
    """The child's answer, cut to :data:`CHILD_TEXT_CHARS` characters (the child's own stream has all of it)."""


class AdvisorReviewed(_EventBase):
    """The advisor model reviewed a batch of tool calls before policy decided them."""

    type: Literal["advisor_reviewed"] = "advisor_reviewed"
    run_id: str
    step: int
    call_ids: list[str]
    verdict: Literal["approve", "warn", "reject", "error"]
    """``error``: the advisor failed or answered malformed, so the batch went on to policy (fail-open)."""
    reasons: list[str] = Field(default_factory=list)
    model: str = ""


TaskState = Literal["pending", "ready", "running", "reviewing", "passed", "failed", "blocked", "cancelled"]
"""Where one task of an orchestration's graph is. ``pending``: a dependency has not passed yet; ``ready``: waiting
for an executor slot; ``running``: an executor child works on it; ``reviewing``: a reviewer child checks the result;
``passed``, ``failed`` (out of attempts), ``blocked`` (a dependency failed) and ``cancelled`` are final."""

OrchestrationStatus = Literal["passed", "failed", "cancelled"]
"""How an orchestration ended: every task passed, some task failed or was blocked, or it was cancelled."""


class PlannedTask(BaseModel):
    """One task of an orchestration's graph, as the planner wrote it (after validation)."""

    id: str
    title: str
    brief: str
    """What the executor is asked to do: its whole context, since a child never sees its parent's history."""
    depends_on: list[str] = Field(default_factory=list)
    """Ids of the tasks that must pass before this one starts."""
    criteria: list[str] = Field(default_factory=list)
    """Acceptance criteria the reviewer checks the result against."""


class OrchestrationStarted(_EventBase):
    """An orchestration began in this session: a goal to plan as a task graph and carry out with child sessions."""

    type: Literal["orchestration_started"] = "orchestration_started"
    orchestration_id: str
    goal: str
    max_parallel: int
    """Executors running at once, at most."""
    task_timeout_s: float
    """Each executor's and reviewer's run is cancelled past this."""
    max_attempts: int
    """Executor attempts per task (a failed review or run re-queues it until then)."""


class TaskGraphPlanning(_EventBase):
    """A planner child was started to write the orchestration's task graph (recorded so a restart waits for it)."""

    type: Literal["task_graph_planning"] = "task_graph_planning"
    orchestration_id: str
    attempt: int
    child_session_id: str
    child_run_id: str = ""
    """Empty when recorded between creating the child's session and starting its run."""
    problem: str = ""
    """What was wrong with the previous attempt's answer (the planner is told)."""


class TaskGraphPlanned(_EventBase):
    """The orchestration's task graph, validated; every task starts ``pending``."""

    type: Literal["task_graph_planned"] = "task_graph_planned"
    orchestration_id: str
    tasks: list[PlannedTask]
    planner_session_id: str = ""
    """The planner child that wrote it (empty: the graph was given, not planned)."""


class TaskStateChanged(_EventBase):
    """One task of an orchestration moved to ``state``."""

    type: Literal["task_state_changed"] = "task_state_changed"
    orchestration_id: str
    task_id: str
    state: TaskState
    attempt: int = 0
    """The executor attempt this transition belongs to (1 for the first; 0 before any)."""
    child_session_id: str = ""
    child_run_id: str = ""
    """``running``: the executor child; ``reviewing``: the reviewer child. A child is recorded twice: once its
    session exists (``child_run_id`` empty), then once its run started, so a restart never starts a second one."""
    reason: str = ""
    """Why (a failed run's reason, a dependency that failed, a verdict)."""
    findings: list[str] = Field(default_factory=list)
    """The reviewer's findings: on ``ready`` after a failed review they go into the next attempt's brief."""
    result: str = ""
    """``reviewing`` and ``passed``: the executor's answer, cut to 2,000 characters (``CHILD_TEXT_CHARS``)."""


class OrchestrationFinished(_EventBase):
    """An orchestration ended; ``counts`` gives its tasks by final state."""

    type: Literal["orchestration_finished"] = "orchestration_finished"
    orchestration_id: str
    status: OrchestrationStatus
    reason: str
    counts: dict[str, int] = Field(default_factory=dict)


CHILD_TEXT_CHARS = 2000
"""How much of a child's brief or answer its parent's stream carries."""


Event = Annotated[
    SessionCreated
    | SessionArchived
    | RunQueued
    | RunStarted
    | UserMessage
    | Notice
    | TextDelta
    | ToolCallDelta
    | ModelRetry
    | AssistantMessage
    | ToolCallStarted
    | ToolCallFinished
    | ApprovalRequested
    | ApprovalDecided
    | ServerFailed
    | ServerStateChanged
    | ServerLog
    | ToolProgress
    | QuestionAsked
    | QuestionAnswered
    | RunResumed
    | RunFinished
    | ContextWatermark
    | ContextCompacted
    | CompactionFailed
    | ModelSwitched
    | ModeChanged
    | ChildStarted
    | ChildActivity
    | ChildFinished
    | AdvisorReviewed
    | OrchestrationStarted
    | TaskGraphPlanning
    | TaskGraphPlanned
    | TaskStateChanged
    | OrchestrationFinished
    | HookRan
    | TodoUpdated
    | LoopDetected
    | GoalStarted
    | GoalSessionStarted
    | GoalVerdict
    | GoalFinished
    | HandoffWritten
    | MemoryArchived,
    Field(discriminator="type"),
]

EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)
"""Validates and serialises any :data:`Event` (e.g. ``EVENT_ADAPTER.validate_json(line)``)."""


def event_run_id(event: Event) -> str | None:
    """The run an event belongs to, if any."""
    return getattr(event, "run_id", None)
