"""The loop's steps on the DBOS engine: each model call, tool call and journal append is a DBOS step.

:class:`DBOSSteps` implements :class:`~orchestrator.loop.steps.Steps`, so the agent loop is the one the embedded
engine runs: the bodies below call :class:`~orchestrator.loop.steps.EmbeddedSteps` for the work itself (streaming
the model's text to live followers, dispatching a tool through the hub and storing its result) and DBOS records
what each returned. A step's result is a small JSON object (DBOS's portable serializer: nothing in the shared
database is unpickled by a worker), carrying the digest of what the step was asked, checked on every replay.

At the frontier of a recovering execution (:class:`~orchestrator.engine.journal.RunJournal`) a tool call may have
run already when its worker died. If its result was stored, that result is used; otherwise the call is run again
only when its tool is read-only or idempotent, and any other call goes to review as a resumed embedded run's
would (an ``approval_requested`` of kind ``review``; a headless run ends ``needs_review``, nothing run again).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from dbos import DBOS

from orchestrator.engine.journal import (
    JOURNAL_STEP,
    JournalledEventLog,
    RunJournal,
    check_replay,
    current,
    digest,
    journalling,
    shape,
)
from orchestrator.events import Event, ToolCallFinished
from orchestrator.hub.outcomes import ToolOutcome
from orchestrator.loop.steps import EmbeddedSteps, complete
from orchestrator.messages import Attachment, Message, ToolUseBlock, Usage
from orchestrator.models.base import ModelError, ModelRequest, ModelResponse, ToolSpec

if TYPE_CHECKING:
    from orchestrator.loop.loop import RunContext

_EMBEDDED = EmbeddedSteps()


class NeedsReview(BaseException):
    """A headless run found a call in doubt that nobody can review: it ends ``needs_review`` (see the workflow)."""

    def __init__(self, use: ToolUseBlock, step: int) -> None:
        super().__init__(use.id)
        self.use = use
        self.step = step


class DBOSSteps:
    """Steps of a run that executes as a DBOS workflow (see the module's docstring)."""

    concurrent = False
    """DBOS numbers a workflow's steps in the order they are asked for: a replay must ask in the same order."""

    def __init__(self, *, headless: bool) -> None:
        self.headless = headless
        """Nobody answers this run's approvals: a call in doubt ends it ``needs_review`` instead of asking."""

    async def model(self, ctx: RunContext, tools: Sequence[ToolSpec]) -> tuple[ModelResponse, float]:
        """See :meth:`Steps.model`; a replay is handed the recorded response (and streams nothing)."""
        journal = _journal()
        place = journal.next_place()
        what = f"model call of step {ctx.step}"
        wanted = digest("model", [ctx.step, len(ctx.history)])
        out = await _model_step(journal, place, wanted, what, ctx, list(tools), False)
        return _response(journal, place, "model", wanted, out)

    async def complete(self, ctx: RunContext, request: ModelRequest) -> ModelResponse:
        """See :meth:`Steps.complete` (a compaction's summary, recorded like any model call)."""
        journal = _journal()
        place = journal.next_place()
        what = f"summary model call at step {ctx.step}"
        wanted = digest("complete", [ctx.step, len(request.messages)])
        out = await _complete_step(journal, place, wanted, what, ctx, request)
        return _response(journal, place, "complete", wanted, out)[0]

    async def tool(self, ctx: RunContext, use: ToolUseBlock) -> ToolOutcome:
        """See :meth:`Steps.tool`; a call in doubt after a worker died is reused, run again or reviewed."""
        journal = _journal()
        place = journal.next_place()
        what = f"tool call {use.name} ({use.id})"
        wanted = digest("tool", [use.id, use.name, use.input])
        out = await _tool_step(journal, place, wanted, what, ctx, use, False)
        check_replay(journal, place, "tool", wanted, out)
        if not out.get("in_doubt"):
            return _outcome(out["outcome"])
        from orchestrator.loop.loop import ask_calls
        from orchestrator.loop.resume import REVIEW_REASON, harmless, skipped

        if not harmless(ctx, use):
            if self.headless:
                raise NeedsReview(use, ctx.step)
            allowed, denied = await ask_calls(ctx, [(use, REVIEW_REASON)], "review")
            if not allowed:
                outcome = ToolOutcome(skipped(denied[0][1].content), True, "denied")
                await ctx.log.append(_finished(ctx, use, outcome))
                return outcome
        place = journal.next_place()
        again = await _tool_step(journal, place, wanted, what, ctx, use, True)
        check_replay(journal, place, "tool", wanted, again)
        return _outcome(again["outcome"])


async def journal_append(log: JournalledEventLog, journal: RunJournal, events: Sequence[Event]) -> None:
    """Append ``events`` as one DBOS step of ``journal``'s workflow (see :mod:`orchestrator.engine.journal`)."""
    place = journal.next_place()
    kinds = shape(events)
    wanted = digest("journal", kinds)
    out = await _journal_step(log, journal, place, wanted, "; ".join(kinds)[:300], list(events))
    check_replay(journal, place, "journal", wanted, out)


def _journal() -> RunJournal:
    journal = current()
    if journal is None:
        raise RuntimeError("a DBOS step was asked for outside a run's workflow")
    return journal


def _ran(journal: RunJournal, kind: str) -> bool:
    return journal.at_frontier(kind)


@DBOS.step(name="loom.model")
async def _model_step(
    journal: RunJournal, place: int, wanted: str, what: str, ctx: RunContext, tools: list[ToolSpec], _: bool
) -> dict[str, Any]:
    _ran(journal, "model")
    with journalling(None):  # a retry's notice, stored from inside the call, is the step's own effect
        try:
            response, ms = await _EMBEDDED.model(ctx, tools)
        except ModelError as exc:
            return _failure(wanted, what, exc)
    return {"digest": wanted, "what": what, "response": _dump_response(response), "ms": ms}


@DBOS.step(name="loom.complete")
async def _complete_step(
    journal: RunJournal, place: int, wanted: str, what: str, ctx: RunContext, request: ModelRequest
) -> dict[str, Any]:
    _ran(journal, "complete")
    with journalling(None):
        try:
            response = await complete(ctx.model, request)
        except ModelError as exc:
            return _failure(wanted, what, exc)
    return {"digest": wanted, "what": what, "response": _dump_response(response), "ms": 0.0}


@DBOS.step(name="loom.tool")
async def _tool_step(
    journal: RunJournal, place: int, wanted: str, what: str, ctx: RunContext, use: ToolUseBlock, force: bool
) -> dict[str, Any]:
    _ran(journal, "tool")
    with journalling(None):
        if not force:
            # An earlier execution may have been inside this very call when its worker died. Its result, if it got
            # as far as the store, is the call's result; if it only started, nobody knows whether it took effect.
            # The store says so, whatever DBOS recorded (a step it lost is run again, and must not act twice).
            stored = journal.finished.get(use.id)
            if stored is not None and stored.run_id == ctx.run_id:
                return {"digest": wanted, "what": what, "outcome": _dump_stored(stored)}
            if use.id in journal.started:
                return {"digest": wanted, "what": what, "in_doubt": True}
        await journal.check_fence(what)
        outcome = await _EMBEDDED.tool(ctx, use)
    return {"digest": wanted, "what": what, "outcome": _dump_outcome(outcome)}


@DBOS.step(name=JOURNAL_STEP)
async def _journal_step(
    log: JournalledEventLog, journal: RunJournal, place: int, wanted: str, what: str, events: list[Event]
) -> dict[str, Any]:
    _ran(journal, "journal")
    # Events an earlier execution stored already are not stored again, whatever DBOS recorded of that step.
    fresh = [e for e in events if e.session_id != journal.session_id or shape([e])[0] not in journal.stored]
    if not fresh:
        return {"digest": wanted, "what": what, "skipped": True}
    await journal.check_fence(what)
    await log.append_now(*fresh)
    return {"digest": wanted, "what": what}


def _response(
    journal: RunJournal, place: int, kind: str, wanted: str, out: dict[str, Any]
) -> tuple[ModelResponse, float]:
    check_replay(journal, place, kind, wanted, out)
    if "error" in out:
        raise ModelError(out["error"], transient=bool(out.get("transient")), status=out.get("status"))
    raw = out["response"]
    response = ModelResponse(
        message=Message.model_validate(raw["message"]),
        stop_reason=raw["stop_reason"],
        usage=Usage.model_validate(raw["usage"]),
    )
    return response, float(out.get("ms", 0.0))


def _failure(wanted: str, what: str, exc: ModelError) -> dict[str, Any]:
    # Recorded, not raised: the portable serializer keeps an exception's message, not its class and fields.
    return {"digest": wanted, "what": what, "error": str(exc), "transient": exc.transient, "status": exc.status}


def _dump_response(response: ModelResponse) -> dict[str, Any]:
    return {
        "message": response.message.model_dump(mode="json"),
        "stop_reason": response.stop_reason,
        "usage": response.usage.model_dump(mode="json"),
    }


def _dump_outcome(outcome: ToolOutcome) -> dict[str, Any]:
    return {
        "content": outcome.content,
        "is_error": outcome.is_error,
        "failure": outcome.failure,
        "structured": outcome.structured,
        "attempts": outcome.attempts,
        "attachments": [a.model_dump(mode="json") for a in outcome.attachments],
    }


def _dump_stored(stored: ToolCallFinished) -> dict[str, Any]:
    return {
        "content": stored.content,
        "is_error": stored.is_error,
        "failure": stored.failure,
        "structured": stored.structured,
        "attempts": 1,
        "attachments": [a.model_dump(mode="json") for a in stored.attachments],
    }


def _outcome(raw: dict[str, Any]) -> ToolOutcome:
    return ToolOutcome(
        content=raw["content"],
        is_error=raw["is_error"],
        failure=raw["failure"],
        structured=raw["structured"],
        attempts=raw["attempts"],
        attachments=tuple(Attachment.model_validate(a) for a in raw["attachments"]),
    )


def _finished(ctx: RunContext, use: ToolUseBlock, outcome: ToolOutcome) -> ToolCallFinished:
    from orchestrator.loop.steps import finished_event

    return finished_event(ctx, use, outcome, 0.0)
