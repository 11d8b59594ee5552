"""Loop detection: a run that keeps making the same tool calls and getting the same results is told, then stopped.

What counts is a *step*: one model answer's tool calls, in order, with the results the model was shown. A step
repeats an earlier one when every call has the same tool name and the same arguments (compared as canonical JSON,
keys sorted) **and** every result is the same as that earlier step's (text, error flag, attachments). A loop is the
same step coming round again and again in a row (period 1), or a cycle through the same two or three steps
(A, B, A, B, ...: period 2 or 3). ``repeats`` is how many times the step (or the whole cycle) has come round.

Why the result must match too: the same call is often the right thing to do again. An agent that runs
``shell__run "make test"`` after each edit, or polls a job until it is done, repeats a call with the same arguments
while the world changes under it; its output changes, so that is progress and never counts. Only a call that gave
the same answer as last time, time after time, is known to be going nowhere. The price is a loop whose output
changes each time (a timestamp in it) going unnoticed; ``max_steps`` still ends such a run. A poll whose output does
not change does count; the notice tells the model to wait inside one call instead.

What happens (defaults in :class:`orchestrator.config.LoopSettings`): when the count reaches ``notice_after`` the
model is told, in a text block after that step's tool results, and again each time the loop comes round after that;
when it reaches ``stop_after`` the run ends ``failed`` with a reason that starts ``loop:`` and names the calls (the
step's results are on record first, as any step's are). Each notice and the stop is a ``loop_detected`` event, stored
before the next model call; a notice's event carries its text, from which a rebuilt history places it again
(:mod:`orchestrator.context.history`).

Counting is per run: a new user message starts afresh (the person has had a say). A detector is made for each
:func:`~orchestrator.loop.loop.run_loop` and first reads the run's steps already in the history, so a resumed run
goes on counting where it was (a compaction in between forgets the steps it summarised).

Cost: a step is compared with the last three by its results first (short strings, cut to what the model saw), and
only when those match are the calls' arguments written out as canonical JSON, so a run that is not looping never
serialises its arguments.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING

from orchestrator.config import LoopSettings
from orchestrator.events_long import LoopDetected
from orchestrator.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock

if TYPE_CHECKING:
    from orchestrator.loop.loop import RunContext

__all__ = ["MAX_PERIOD", "RepeatWatch", "loop_note", "signature", "stop_reason", "watch_for"]

MAX_PERIOD = 3
"""The longest cycle looked for, in steps: a longer one is rarely a loop and more often a plan being worked."""
SHOWN_CALL_CHARS = 200
"""What a notice, an event and a stop reason show of one call (a file's whole content is not needed)."""


def signature(use: ToolUseBlock) -> str:
    """A call as ``tool({canonical JSON arguments})``: keys sorted, no spaces, so equal calls are equal strings."""
    arguments = json.dumps(use.input, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return f"{use.name}({arguments})"


class _Step:
    """One step as the detector compares it: its calls and what the model was shown of their results."""

    __slots__ = ("_signatures", "names", "results", "uses")

    def __init__(self, uses: Sequence[ToolUseBlock], results: Sequence[ToolResultBlock]) -> None:
        by_id = {r.tool_use_id: r for r in results}
        self.uses = tuple(uses)
        self.names = tuple(u.name for u in uses)
        self.results = tuple(_seen(by_id.get(u.id), u.id) for u in uses)
        self._signatures: tuple[str, ...] | None = None

    def signatures(self) -> tuple[str, ...]:
        """The calls' signatures, written out on first use (only a step whose results repeat is ever asked)."""
        if self._signatures is None:
            self._signatures = tuple(signature(u) for u in self.uses)
        return self._signatures

    def same(self, other: _Step) -> bool:
        """Whether this step repeats ``other``: the same calls, in order, with the same results."""
        return self.names == other.names and self.results == other.results and self.signatures() == other.signatures()


def _seen(block: ToolResultBlock | None, call_id: str) -> tuple[str, bool, tuple[object, ...]]:
    if block is None:
        return "", True, ()
    # A result cut to size names its own call id (how to read the rest), which differs each time.
    content = block.content.replace(call_id, "") if call_id in block.content else block.content
    return content, block.is_error, tuple(block.attachments)


class RepeatWatch:
    """Counts how many times in a row the run's latest step (or cycle of steps) has come round; see the module."""

    def __init__(self, settings: LoopSettings) -> None:
        self.settings = settings
        self._recent: deque[_Step] = deque(maxlen=MAX_PERIOD)
        self._matched = [0] * (MAX_PERIOD + 1)
        """By period p: how many steps in a row have each repeated the step p before them."""

    def seed(self, history: Sequence[Message]) -> None:
        """Count the current run's steps already in ``history`` (a resumed run), without telling anyone."""
        start = len(history)
        while start > 0 and not _opens_run(history[start - 1]):
            start -= 1
        for i in range(start, len(history) - 1):
            uses = history[i].tool_uses if history[i].role == "assistant" else []
            if uses and history[i + 1].role == "user":
                self.count(uses, [b for b in history[i + 1].content if isinstance(b, ToolResultBlock)])

    def count(self, uses: Sequence[ToolUseBlock], results: Sequence[ToolResultBlock]) -> tuple[int, int]:
        """Add one step; returns ``(repeats, period)`` when it completes a round of a loop, else ``(0, 0)``.

        ``repeats`` counts the first time too: the same call three times in a row is 3.
        """
        step = _Step(uses, results)
        best, period = 0, 0
        for p in range(1, MAX_PERIOD + 1):
            if len(self._recent) >= p and step.same(self._recent[-p]):
                self._matched[p] += 1
                run = self._matched[p] + p
                if run % p == 0 and run // p > best:  # a whole round; the shortest period wins a tie
                    best, period = run // p, p
            else:
                self._matched[p] = 0
        self._recent.append(step)
        return best, period

    def observe(self, ctx: RunContext, uses: Sequence[ToolUseBlock], results: Sequence[object]) -> LoopDetected | None:
        """Count the step just finished; the event to record when it is a loop worth a notice or a stop, else None."""
        blocks = [r for r in results if isinstance(r, ToolResultBlock)]
        repeats, period = self.count(uses, blocks)
        if repeats < self.settings.notice_after:
            return None
        calls = [_shown(use) for step in list(self._recent)[-period:] for use in step.uses]
        event = LoopDetected(
            session_id=ctx.session_id,
            run_id=ctx.run_id,
            step=ctx.step,
            action="stop" if repeats >= self.settings.stop_after else "notice",
            repeats=repeats,
            calls=calls,
            period=period,
        )
        if event.action == "notice":
            event.note = loop_note(event, self.settings.stop_after)
        return event

    async def after_step(
        self, ctx: RunContext, uses: Sequence[ToolUseBlock], results: list[ToolResultBlock | TextBlock]
    ) -> str | None:
        """Count the step whose ``results`` just came back, and record what it makes of it.

        A notice joins ``results`` (after them) and is recorded; a stop is recorded and its reason returned: the run
        should end ``failed`` with it. None: carry on.
        """
        event = self.observe(ctx, uses, results)
        if event is None:
            return None
        if event.note:
            results.append(TextBlock(text=event.note))  # after the results, as a rebuilt history places it
        await ctx.log.append(event)
        return stop_reason(event) if event.action == "stop" else None


def watch_for(ctx: RunContext) -> RepeatWatch | None:
    """The detector for one run (None when loop detection is off), having counted the run's steps so far."""
    settings = ctx.loop
    if settings is None or not settings.enabled:
        return None
    watch = RepeatWatch(settings)
    watch.seed(ctx.history)
    return watch


def loop_note(event: LoopDetected, stop_after: int) -> str:
    """What the model is told when a loop is noticed."""
    if event.period <= 1 and len(event.calls) == 1:
        what = f"made the same call, with the same arguments and the same result, {event.repeats} times in a row"
    elif event.period <= 1:
        what = f"made the same {len(event.calls)} calls, with the same results, {event.repeats} times in a row"
    else:
        what = f"gone round the same cycle of {event.period} steps, with the same results, {event.repeats} times"
    shown = "\n".join(f"- {call}" for call in event.calls)
    return (
        f"[Loom] Loop detected: you have {what}:\n{shown}\n"
        "Doing it again will not give a different answer. Change the approach (other arguments, another tool, "
        "fixing the cause first), or stop and tell the user what blocks you. If you are waiting for something to "
        "change, wait inside one call (for example `until CHECK; do sleep 5; done`) instead of calling again. "
        f"Loom stops the run if this comes round {stop_after} times."
    )


def stop_reason(event: LoopDetected) -> str:
    """The run's reason when a loop stops it: ``loop:``, then what repeated and how often."""
    if event.period <= 1:  # one step: its calls were one batch
        same = "the same result" if len(event.calls) == 1 else "the same results"
        return f"loop: {', '.join(event.calls)} repeated {event.repeats} times in a row with {same}"
    calls = " → ".join(event.calls)
    return f"loop: the cycle {calls} came round {event.repeats} times in a row with the same results"


def _opens_run(message: Message) -> bool:
    """A user turn that is not tool results: the run's own message (or the summary standing for it)."""
    return message.role == "user" and not any(isinstance(b, ToolResultBlock) for b in message.content)


def _shown(use: ToolUseBlock) -> str:
    text = signature(use)
    return text if len(text) <= SHOWN_CALL_CHARS else text[: SHOWN_CALL_CHARS - 1] + "…"
