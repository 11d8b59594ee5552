"""The handoff: what a session writes so that a fresh session can carry on its work, and the checks it must pass.

A handoff ends a session on purpose (its context has rotted, a goal's session passed its watermark): a fresh
session with the same directory, mode and rules starts from the handoff alone. So, like a compaction summary
(:mod:`orchestrator.context.summary`), it has a fixed shape the prompt asks for and a program checks: every
block there, every user instruction quoted verbatim, not longer than a fresh context should spend on it. The
checking is the summary's own (:func:`~orchestrator.context.summary.check_shape`). The model's plan (the ``todo``
tool's list) is not left to the model to copy: Loom appends it, verbatim, as a block of its own.

Nothing here touches the store: :mod:`orchestrator.runtime.handoff` gathers the events, asks the model, records.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from orchestrator.context.compaction import MAX_INSTRUCTION_CHARS
from orchestrator.context.history import rebuild_context
from orchestrator.context.plan import latest_plan
from orchestrator.context.plan import render_plan as plan_lines
from orchestrator.context.summary import check_shape, instructions_part, render_transcript
from orchestrator.context.tokens import estimate_messages, estimate_text
from orchestrator.events import Event, UserMessage
from orchestrator.events_long import HandoffWritten, TodoItem
from orchestrator.messages import Message, TextBlock
from orchestrator.models.base import ModelError, ModelRequest, ModelResponse

__all__ = [
    "BLOCKS",
    "HANDOFF_BUDGET_TOKENS",
    "MAX_ATTEMPTS",
    "HandoffFailed",
    "HandoffSource",
    "check_handoff",
    "handoff_request",
    "handoff_source",
    "render_plan",
    "write_handoff",
]

BLOCKS = (
    "Goal and constraints",
    "Decisions",
    "State of files and systems",
    "Work done",
    "Open items",
    "Next step",
    "Warnings",
)
"""The handoff's markdown blocks (``## <name>``), in the order the prompt asks for them."""

HANDOFF_BUDGET_TOKENS = 3000
"""The size a handoff is asked to stay under, besides the instructions it quotes; twice this fails the checks."""

MAX_ATTEMPTS = 2
"""As for a compaction summary: one retry with the problem stated, then the session is left as it is."""

PLAN_HEADING = "## Plan (as the session left it, copied by Loom)"

SYSTEM_PROMPT = """\
You write the handoff for Loom, a local agent runtime. The session below ends here: a FRESH agent session, \
in the same working directory with the same mode and rules, continues the work from your handoff alone. It \
will not see this conversation. Whatever you leave out is lost to it; whatever you state it will take as fact.

Rules:
- Copy every user instruction listed verbatim, character for character, into "## Goal and constraints" \
(as a bullet in double quotes; do not rewrap, translate, abbreviate or merge them).
- Record the decisions taken and why, the state of the files and of any systems touched (what is written, \
running, half-done), and the concrete values the next agent needs (paths, names, commands, errors, numbers).
- In "## Work done" cite the evidence for each item: the tool result seen or the file written. Never \
claim anything the transcript does not show; if an outcome is unknown or a call failed, say so.
- In "## Warnings" say what could trip the next agent up (traps found, things that must not be redone).
- Answer with the handoff only: no preamble, no closing remarks, no tool calls."""


class HandoffFailed(Exception):
    """The model's handoff could not be had: its call failed, or its text failed the checks twice.

    Attributes:
        attempts: How many times the model was asked.
    """

    def __init__(self, message: str, attempts: int) -> None:
        super().__init__(message)
        self.attempts = attempts


@dataclass(frozen=True, slots=True)
class HandoffSource:
    """What a handoff is written from: the session's context as its model sees it, and what must be carried."""

    messages: list[Message]
    """The session's history as the model sees it now (a compaction's summary or a handoff's text first)."""
    has_summary: bool
    """``messages`` opens with a compaction's summary."""
    instructions: list[str]
    """The user's instructions to quote verbatim, in order, without duplicates (see :func:`handoff_source`)."""
    plan: list[TodoItem] = field(default_factory=list[TodoItem])
    """The model's plan as its latest ``todo_updated`` left it; empty when it never wrote one."""
    tokens: int = 0
    """Estimated tokens of ``messages``."""


def handoff_source(events: Sequence[Event]) -> HandoffSource:
    """Gather what the handoff of a session with these events (in ``seq`` order) is written from.

    The instructions are those the latest compaction carried, those a handoff this session started from carried
    (and the person's extra text given with it), then every user message of the context since, in order; a
    message longer than a compaction would quote (a pasted log) is material, not an instruction.
    """
    context = rebuild_context(events)
    instructions: list[str] = []

    def add(text: str) -> None:
        if text.strip() and len(text) <= MAX_INSTRUCTION_CHARS and text not in instructions:
            instructions.append(text)

    for event in events:
        if isinstance(event, HandoffWritten) and event.from_session_id:
            for text in [*event.instructions, event.extra]:
                add(text)
            break
    if context.compaction is not None:
        for text in context.compaction.instructions:
            add(text)
    for event in context.tail:
        if isinstance(event, UserMessage):
            add(event.text)
    plan = latest_plan(events)
    return HandoffSource(
        messages=context.messages,
        has_summary=context.compaction is not None,
        instructions=instructions,
        plan=plan,
        tokens=estimate_messages(context.messages),
    )


def render_plan(plan: Sequence[TodoItem]) -> str:
    """The plan as the handoff's last block: each item's text verbatim, numbered, its status as the summary shows it."""
    return PLAN_HEADING + "\n" + plan_lines(plan)


def handoff_request(
    source: HandoffSource, *, extra: str = "", problem: str = "", max_tokens: int = 4096
) -> ModelRequest:
    """The model call that asks for the handoff of ``source``.

    Args:
        source: The session's context and what must be carried.
        extra: What the person asks of the fresh session besides (carried to it verbatim by Loom; shown here so
            that the handoff can take it into account).
        problem: On a retry, what the previous attempt got wrong (from :func:`check_handoff`).
        max_tokens: The most the model may write.

    Returns:
        A request without tools: the system prompt and one user message (``purpose`` ``summary``: an answer
        outside the conversation, which a scripted model takes from its ``summaries``).
    """
    parts = [
        "Write the handoff of this session so that a fresh agent session can carry on from it alone.",
        f"<transcript>\n{render_transcript(source.messages, has_summary=source.has_summary)}\n</transcript>",
    ]
    parts.append(instructions_part(source.instructions))
    if source.plan:
        parts.append(
            "The agent's plan (Loom appends it to your handoff as it is; refer to it, do not copy it):\n"
            + render_plan(source.plan)
        )
    if extra.strip():
        parts.append(f"The person adds, for the fresh session (Loom passes it on verbatim):\n{extra.strip()}")
    blocks = "\n".join(f"## {name}" for name in BLOCKS)
    budget = HANDOFF_BUDGET_TOKENS + sum(estimate_text(i) for i in source.instructions)
    parts.append(
        "Required format: exactly these markdown sections, in this order, each heading on its own line:\n"
        f"{blocks}\n"
        '"## Goal and constraints" quotes every user instruction verbatim. "## Work done" cites evidence (tool'
        ' results seen, files written) and claims nothing the transcript does not show. Write "none" under a'
        f" section with nothing to say. Stay under about {budget} tokens."
    )
    if problem:
        parts.append(f"Your previous handoff was rejected: {problem}\nWrite the whole handoff again, fixing this.")
    message = Message(role="user", content=[TextBlock(text="\n\n".join(parts))])
    return ModelRequest(system=SYSTEM_PROMPT, messages=[message], tools=(), max_tokens=max_tokens, purpose="summary")


def check_handoff(text: str, source: HandoffSource) -> str | None:
    """What is wrong with ``text`` as the handoff of ``source``, or ``None`` if nothing is.

    Every block present and every instruction quoted verbatim (the compaction summary's checks), and not more
    than twice the size asked for.
    """
    problems = check_shape(text, BLOCKS, source.instructions)
    limit = 2 * HANDOFF_BUDGET_TOKENS + sum(estimate_text(i) for i in source.instructions)
    tokens = estimate_text(text)
    if tokens > limit:
        problems.append(f"the handoff (about {tokens} tokens) is longer than the {limit} tokens it may take")
    return "; ".join(problems) or None


async def write_handoff(
    source: HandoffSource,
    call_model: Callable[[ModelRequest], Awaitable[ModelResponse]],
    *,
    extra: str = "",
    max_tokens: int = 4096,
) -> tuple[str, int]:
    """Ask the model for the handoff, check it, ask once more with the problem stated if it fails.

    Returns:
        The handoff's text (the plan appended when there is one) and how many attempts it took.

    Raises:
        HandoffFailed: the model call failed, or the handoff failed its checks :data:`MAX_ATTEMPTS` times.
    """
    problem = ""
    for attempt in range(1, MAX_ATTEMPTS + 1):
        try:
            response = await call_model(handoff_request(source, extra=extra, problem=problem, max_tokens=max_tokens))
        except ModelError as exc:
            raise HandoffFailed(f"the model call for the handoff failed ({exc})", attempt) from exc
        text = response.message.text.strip()
        found = check_handoff(text, source)
        if found is not None and response.stop_reason == "max_tokens":
            found += f"; it was cut off at the output limit of {max_tokens} tokens, so write less"
        if found is None:
            if source.plan:
                text = f"{text}\n\n{render_plan(source.plan)}"
            return text, attempt
        problem = found
    raise HandoffFailed(f"the handoff failed its checks {MAX_ATTEMPTS} times ({problem})", MAX_ATTEMPTS)
