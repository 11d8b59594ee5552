"""The compaction summary: the prompt that asks for it and the checks it must pass.

A summary replaces history the agent can no longer see, so a bad one silently loses work or, worse,
the user's instructions. The prompt asks for a fixed shape (six sections) and for the instructions
copied verbatim; the checks enforce the parts a program can verify (every section there, every
instruction there word for word, and shorter than what it replaces) instead of trusting the model.
What cannot be checked (claims the transcript does not support) the prompt forbids explicitly.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from orchestrator.context.tokens import estimate_text
from orchestrator.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from orchestrator.models.base import ModelRequest

if TYPE_CHECKING:
    from orchestrator.context.compaction import CompactionPlan

SECTIONS = ("Goal and constraints", "Decisions", "Files and state", "Work done", "Open items", "Next step")
"""The summary's markdown sections (``## <name>``), in the order the prompt asks for them."""

SUMMARY_BUDGET_TOKENS = 2000
"""The size a summary is asked to stay under (before the verbatim instructions), and assumed by previews."""

MAX_TRANSCRIPT_ITEM = 2000
"""Characters of one tool result or tool-call argument list shown to the summariser: enough to see what
happened, while a session of large file reads still fits one bounded request."""

SYSTEM_PROMPT = """\
You write the compaction summary for Loom, a local agent runtime. The conversation below has grown too \
long for the model's context window. Your summary will REPLACE it: the agent that continues the work \
will see only your summary and the most recent messages, nothing else from before. Whatever you leave \
out is lost to that agent; whatever you state it will take as fact.

Rules:
- Copy every user instruction listed verbatim, character for character, into "## Goal and constraints" \
(as a bullet in double quotes; do not rewrap, translate, abbreviate or merge them).
- Record decisions and why they were taken, the files touched and their current state, and concrete \
values the agent will need (paths, names, commands, errors, numbers).
- In "## Work done" cite the evidence for each item: the tool result seen or the file written. Never \
claim anything the transcript does not show; if an outcome is unknown or a call failed, say so.
- Be concise: the summary must be much shorter than the transcript.
- Answer with the summary only: no preamble, no closing remarks, no tool calls."""


def summary_request(
    plan: CompactionPlan, *, focus: str = "", problem: str = "", max_tokens: int = 4096
) -> ModelRequest:
    """The model call that asks for the summary of ``plan``'s dropped messages.

    Args:
        plan: What is being replaced (its transcript and the instructions to carry).
        focus: What the user wants kept in most detail (``/compact <focus>``); empty for no preference.
        problem: On a retry, what the previous attempt got wrong (from :func:`check_summary`).
        max_tokens: The most the model may write.

    Returns:
        A request without tools: the system prompt and one user message.
    """
    budget = min(SUMMARY_BUDGET_TOKENS, max(plan.tokens_dropped // 2, 1)) + sum(
        estimate_text(i) for i in plan.instructions
    )
    parts = [
        "Summarise this conversation so an agent can continue the work from your summary alone.",
        f"<transcript>\n{render_transcript(plan.dropped, has_summary=plan.previous is not None)}\n</transcript>",
    ]
    parts.append(instructions_part(plan.instructions, "in this part"))
    if focus.strip():
        parts.append(f"Give most room to: {focus.strip()}")
    sections = "\n".join(f"## {name}" for name in SECTIONS)
    parts.append(
        "Required format: exactly these markdown sections, in this order, each heading on its own line:\n"
        f"{sections}\n"
        '"## Goal and constraints" quotes every user instruction verbatim. "## Work done" cites evidence (tool'
        ' results seen, files written) and claims nothing the transcript does not show. Write "none" under a'
        f" section with nothing to say. Stay under about {budget} tokens."
    )
    if problem:
        parts.append(f"Your previous summary was rejected: {problem}\nWrite the whole summary again, fixing this.")
    message = Message(role="user", content=[TextBlock(text="\n\n".join(parts))])
    return ModelRequest(system=SYSTEM_PROMPT, messages=[message], tools=(), max_tokens=max_tokens, purpose="summary")


def instructions_part(instructions: Sequence[str], where: str = "") -> str:
    """The request's paragraph listing the user's instructions to quote verbatim (a summary's or a handoff's).

    ``where`` narrows the sentence said when there are none ("in this part": a compaction sees only some history).
    """
    if not instructions:
        scope = f" {where}" if where else ""
        return f"The user gave no instructions{scope}; state the goal as the transcript shows it."
    # Raw text between tags, not JSON: an escaped quote or newline copied as such would not be verbatim.
    listed = "\n".join(f"<instruction>\n{text}\n</instruction>" for text in instructions)
    return (
        "The user's instructions, each to be quoted verbatim (the text between the tags) under \"## Goal and"
        f' constraints":\n{listed}'
    )


def render_transcript(messages: Sequence[Message], *, has_summary: bool = False) -> str:
    """``messages`` as plain text for the summariser, long tool results and arguments shortened.

    Args:
        messages: The messages being replaced, in order.
        has_summary: The first text block is an earlier compaction's summary (labelled as such).
    """
    lines: list[str] = []
    first_text = has_summary
    for message in messages:
        for block in message.content:
            if isinstance(block, TextBlock):
                if first_text:
                    lines.append(f"[summary of the conversation before this]\n{block.text}")
                    first_text = False
                elif block.text:
                    lines.append(f"[{message.role}]\n{block.text}")
            elif isinstance(block, ToolUseBlock):
                arguments = _shorten(json.dumps(block.input, ensure_ascii=False))
                lines.append(f"[tool call {block.id}: {block.name}]\n{arguments}")
            elif isinstance(block, ToolResultBlock):
                marker = " — ERROR" if block.is_error else ""
                lines.append(f"[tool result {block.tool_use_id}{marker}]\n{_shorten(block.content)}")
    return "\n\n".join(lines)


def check_summary(summary: str, plan: CompactionPlan) -> str | None:
    """What is wrong with ``summary`` as a replacement for ``plan``'s messages, or ``None`` if nothing is.

    A section is present when a line ``## <name>`` exists (case and surrounding whitespace ignored). An
    instruction is carried when it occurs in the summary exactly, runs of whitespace aside.

    Returns:
        ``None``, or one message naming every problem (missing sections, instructions not carried
        verbatim, not shorter than the history it replaces).
    """
    problems = check_shape(summary, SECTIONS, plan.instructions)
    tokens = estimate_text(summary)
    if tokens >= plan.tokens_dropped:
        problems.append(
            f"the summary (about {tokens} tokens) is not shorter than the history it replaces"
            f" (about {plan.tokens_dropped} tokens)"
        )
    return "; ".join(problems) or None


def check_shape(text: str, sections: Sequence[str], instructions: Sequence[str]) -> list[str]:
    """What is wrong with the shape of ``text`` (a summary, a handoff): sections missing, instructions not quoted.

    A section is present when a line ``## <name>`` exists (case and surrounding whitespace ignored). An
    instruction is carried when it occurs in ``text`` exactly, runs of whitespace aside. Shared by the compaction
    summary and the handoff (:mod:`orchestrator.context.handoff`), so both are held to the same rules.

    Returns:
        One message per kind of problem, in the order above; empty when there is none.
    """
    problems: list[str] = []
    headings = {_squash(m.group(1)).lower() for line in text.splitlines() if (m := _HEADING.fullmatch(line.strip()))}
    missing = [name for name in sections if name.lower() not in headings]
    if missing:
        problems.append("missing sections: " + ", ".join(f'"## {name}"' for name in missing))
    squashed = _squash(text)
    lost = [i for i in instructions if _squash(i) and _squash(i) not in squashed]
    if lost:
        quoted = "; ".join(json.dumps(_clip(i), ensure_ascii=False) for i in lost)
        problems.append(f"user instructions not quoted verbatim ({len(lost)}): {quoted}")
    return problems


_WHITESPACE = re.compile(r"\s+")
_HEADING = re.compile(r"##\s*(.*?)")


def _squash(text: str) -> str:
    return _WHITESPACE.sub(" ", text).strip()


def _clip(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _shorten(text: str, limit: int = MAX_TRANSCRIPT_ITEM) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit} more characters not shown]"
