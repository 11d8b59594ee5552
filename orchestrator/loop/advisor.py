"""The advisor: a second model reviews a batch of tool calls after the model proposes it, before policy decides it.

Modes (``advisor`` in config, or per session): ``off``; ``lightweight``, which reviews only a batch with a risky call
(:mod:`orchestrator.loop.advisor_risk`); ``full``, which reviews every batch. The advisor is shown the run's goal
(its user message), the working directory and each call with its arguments, and answers JSON
``{"verdict": "approve" | "warn" | "reject", "reasons": [...]}``:

- ``approve``: the batch goes on to policy;
- ``warn``: it goes on to policy, and the warnings reach the model after the calls' results;
- ``reject``: nothing in the batch runs and policy is not asked; each call gets an error result (failure
  ``denied``) saying why.

An advisor that fails, takes longer than its timeout, or answers anything but that JSON lets the batch go on to
policy (fail-open: the advisor adds a check, policy stays the one that decides), and the review says so (verdict
``error``). Every review is an ``advisor_reviewed`` event, stored in the batch with the assistant message it
reviewed, so it is journalled with it: a resumed run reads the verdict back from the store and never asks again
about a batch already reviewed (the calls a rejection refused are on record as finished; the others are started
or go to policy again, as any interrupted call does).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

import anyio

from orchestrator.config import ADVISOR_MODES, DEFAULT_ADVISOR_TIMEOUT_S, AdvisorSettings
from orchestrator.events import AdvisorReviewed
from orchestrator.loop.advisor_risk import risks
from orchestrator.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from orchestrator.models.base import Model, ModelRequest

if TYPE_CHECKING:
    from orchestrator.loop.loop import RunContext

__all__ = ["Advisor", "AdvisorError", "advice_note", "advisor_for", "rejection"]

logger = logging.getLogger(__name__)

Verdict = Literal["approve", "warn", "reject", "error"]
MAX_REASONS = 8
MAX_REASON_CHARS = 500
"""What one review may carry: an advisor cannot flood the agent's context or the event log."""
MAX_ARGUMENT_CHARS = 4000
MAX_GOAL_CHARS = 4000
"""What the advisor is shown of each call's arguments and of the goal (a file's whole content is not needed)."""

SYSTEM = """You are the advisor of a coding agent. Before its tool calls run, you review the batch it proposed.
Judge whether the calls serve the user's goal and whether any could do harm the user would not want: deleting or
overwriting work, touching files outside the working directory, leaking secrets, running untrusted code.
Answer with JSON only, no other text:
{"verdict": "approve" | "warn" | "reject", "reasons": ["..."]}
approve: the batch is fine (reasons may be empty). warn: it may run, but the agent should heed your reasons.
reject: none of the batch may run; your reasons tell the agent why. warn and reject need at least one reason."""


class AdvisorError(ValueError):
    """An advisor cannot be set up as asked (an unknown mode); the message says what is allowed."""


class Advisor:
    """Reviews batches of tool calls with its own model (see the module's docstring)."""

    def __init__(
        self,
        model: Model,
        mode: Literal["lightweight", "full"],
        *,
        cwd: str,
        timeout_s: float = DEFAULT_ADVISOR_TIMEOUT_S,
        follows_session: bool = False,
    ) -> None:
        self.model = model
        self.follows_session = follows_session
        """``model`` is the session's own (no advisor model configured): a model switch should switch it too."""
        self.mode = mode
        self.cwd = cwd
        """The session's working directory: what the advisor is told, and what "outside" is measured from."""
        self.timeout_s = timeout_s

    def flags(self, ctx: RunContext, uses: Sequence[ToolUseBlock]) -> list[str] | None:
        """What makes the batch worth a review (``[]`` in ``full`` mode for a harmless one); None: skip it."""
        found = [f"{u.name} ({u.id}): {why}" for u in uses for why in risks(ctx.hub.tool(u.name), u.input, self.cwd)]
        return found if found or self.mode == "full" else None

    async def review(self, ctx: RunContext, uses: Sequence[ToolUseBlock]) -> AdvisorReviewed | None:
        """Review one batch; None when this mode does not review it (a harmless batch, lightweight).

        Never raises for the advisor's own failure: that is a review with the verdict ``error``.
        """
        flagged = self.flags(ctx, uses)
        if flagged is None:
            return None
        request = ModelRequest(
            system=SYSTEM,
            messages=[Message(role="user", content=[TextBlock(text=self.prompt(ctx, uses, flagged))])],
            max_tokens=1024,
        )
        verdict: Verdict
        try:
            with anyio.move_on_after(self.timeout_s) as scope:
                # Through the loop's seam, as a call outside the conversation: an engine journals it like any step.
                response = await ctx.steps.complete(replace(ctx, model=self.model), request)
            if scope.cancelled_caught:
                verdict, reasons = "error", [f"the advisor did not answer within {self.timeout_s:g} s"]
            else:
                verdict, reasons = parse_answer(response.message.text)
        except Exception as exc:  # fail-open by design: any failure of the advisor lets policy decide
            logger.warning("advisor %s failed: %s", self.model.name, exc)
            verdict, reasons = "error", [f"the advisor failed: {exc}"[:MAX_REASON_CHARS]]
        return AdvisorReviewed(
            session_id=ctx.session_id,
            run_id=ctx.run_id,
            step=ctx.step,
            call_ids=[u.id for u in uses],
            verdict=verdict,
            reasons=reasons,
            model=self.model.name,
        )

    def prompt(self, ctx: RunContext, uses: Sequence[ToolUseBlock], flagged: Sequence[str]) -> str:
        """The advisor's one user message: the goal, the working directory, the calls and what Loom flagged."""
        calls = [
            f"{i}. {u.name} (id {u.id}) with arguments {_clip(json.dumps(u.input), MAX_ARGUMENT_CHARS)}"
            for i, u in enumerate(uses, 1)
        ]
        parts = [
            f"The user's goal:\n{_clip(goal_of(ctx.history), MAX_GOAL_CHARS)}",
            f"The working directory: {self.cwd}",
            "The tool calls the agent proposes, in one batch:\n" + "\n".join(calls),
        ]
        if flagged:
            parts.append("Loom flagged:\n" + "\n".join(f"- {why}" for why in flagged))
        return "\n\n".join(parts)


def goal_of(history: Sequence[Message]) -> str:
    """The run's user message: the latest user turn that is not tool results (after a compaction, its summary)."""
    for message in reversed(history):
        if message.role == "user" and not any(isinstance(b, ToolResultBlock) for b in message.content):
            return message.text
    return "(unknown)"


def parse_answer(text: str) -> tuple[Verdict, list[str]]:
    """The verdict and reasons in the advisor's answer; ``("error", [why])`` for anything malformed."""
    body = text.strip()
    if body.startswith("```"):  # a fenced block, as models like to write JSON
        body = body.split("\n", 1)[1] if "\n" in body else ""
        body = body.rsplit("```", 1)[0]
    try:
        data: Any = json.loads(body)
    except ValueError:
        return "error", [f"the advisor's answer is not JSON: {_clip(text, 200)!r}"]
    if not isinstance(data, dict):
        return "error", ["the advisor's answer is not a JSON object"]
    verdict = data.get("verdict")
    reasons = data.get("reasons", [])
    if verdict not in ("approve", "warn", "reject"):
        return "error", [f"the advisor's verdict {_clip(str(verdict), 60)!r} is not approve, warn or reject"]
    if not isinstance(reasons, list) or not all(isinstance(r, str) for r in reasons):
        return "error", ["the advisor's reasons are not a list of strings"]
    kept = [_clip(r.strip(), MAX_REASON_CHARS) for r in reasons if r.strip()][:MAX_REASONS]
    if verdict != "approve" and not kept:
        return "error", [f"the advisor said {verdict} without a reason"]
    return verdict, kept


def rejection(review: AdvisorReviewed) -> str:
    """The error result each call of a rejected batch gets."""
    return (
        "not run: the advisor (a second model that reviews tool calls before they run) rejected this batch, so none "
        f"of its calls ran: {'; '.join(review.reasons)}. Change the approach, or ask the user"
    )


def advice_note(review: AdvisorReviewed) -> TextBlock | None:
    """What the model is told after the results of a batch approved with warnings; None for any other verdict."""
    if review.verdict != "warn":
        return None
    items = "\n".join(f"- {why}" for why in review.reasons)
    return TextBlock(text=f"[Loom advisor] These calls were allowed, with warnings to heed:\n{items}")


def advisor_for(
    settings: AdvisorSettings | None,
    resolve_model: Callable[[str], Model],
    session_model: Model,
    *,
    cwd: str,
    mode: str | None = None,
) -> Advisor | None:
    """The advisor a session gets: from the config's ``advisor`` and the session's own choice of ``mode``.

    Args:
        settings: The config's ``advisor`` (None: off unless ``mode`` turns it on).
        resolve_model: Builds a model from a spec (``orchestrator.models.resolve_model``).
        session_model: Used when the settings name no model.
        cwd: The session's working directory.
        mode: The session's own mode (``create_session``'s ``advisor``), which wins over the config's.

    Raises:
        AdvisorError: ``mode`` is not off, lightweight or full.
        orchestrator.models.ModelSpecError: the settings' model cannot be built.
    """
    settings = settings or AdvisorSettings()
    chosen = settings.mode if mode is None else mode
    if chosen not in ADVISOR_MODES:
        raise AdvisorError(f"unknown advisor mode {chosen!r}; use {', '.join(ADVISOR_MODES)}")
    if chosen == "off":
        return None
    model = resolve_model(settings.model) if settings.model else session_model
    kind: Literal["lightweight", "full"] = "full" if chosen == "full" else "lightweight"
    return Advisor(model, kind, cwd=cwd, timeout_s=settings.timeout_s, follows_session=not settings.model)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
