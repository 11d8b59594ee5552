"""The context watermark: how full the model's window is, from provider usage where there is some.

After a model call the provider's usage is exact: the request's input tokens plus the answer's
output tokens are what the next request starts from. What was added since (tool results, a resume
note) has not been counted by anyone, so it is estimated. A provider that reports no input tokens
(some OpenAI-compatible servers, the scripted model) is estimated in full. The meter remembers which
message the reported figure ends at, so a history that was replaced (compaction, a cancelled run
rebuilt from the store, a model switch) falls back to a full estimate instead of a stale figure.

Estimates are kept as running totals (per message appended, and the system prompt and tool
definitions once per run), so that measuring before every model call costs the same at step 200 as
at step 2: a provider that reports no usage must not make each step re-read the whole history.
"""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.context.tokens import estimate_messages, estimate_overhead
from orchestrator.events import ContextWatermark
from orchestrator.messages import Message, Usage
from orchestrator.models.base import ToolSpec
from orchestrator.models.profiles import ModelProfile


class ContextMeter:
    """Tokens in use for one session's model, and the watermark events that report them."""

    def __init__(self, model: str, profile: ModelProfile) -> None:
        self.model = model
        self.profile = profile
        self._reported: int | None = None
        self._last: Message | None = None
        self._covered = 0
        self._counted: tuple[Message | None, int, int] = (None, 0, 0)
        """(last message counted, how many, their estimate): the running total of the history's estimate."""
        self._fixed: tuple[str, list[ToolSpec], int] | None = None
        """(system prompt, tools, their estimate), reused while the loop passes the same objects."""

    def reset(self, model: str | None = None, profile: ModelProfile | None = None) -> None:
        """Forget the last reported figure (the history or the model changed), optionally for a new model."""
        self.model = model or self.model
        self.profile = profile or self.profile
        self._reported = None
        self._last = None
        self._covered = 0
        self._counted = (None, 0, 0)

    def estimate(self, system: str, history: Sequence[Message], tools: Sequence[ToolSpec] = ()) -> int:
        """Loom's estimate of a whole request, extending running totals where the history only grew."""
        last, count, total = self._counted
        if not (0 < count <= len(history) and history[count - 1] is last):
            count, total = 0, 0
        total += estimate_messages(history[count:])
        self._counted = (history[-1] if history else None, len(history), total)
        # By value: each run lists its tools afresh (equal specs over the same schema objects, cheap to compare),
        # and serialising every schema again to count it was most of this estimate.
        if self._fixed is None or self._fixed[0] != system or self._fixed[1] != list(tools):
            self._fixed = (system, list(tools), estimate_overhead(system, tools))
        return self._fixed[2] + total

    def used(self, system: str, history: Sequence[Message], tools: Sequence[ToolSpec] = ()) -> int:
        """Tokens the next request would use: the last reported figure plus an estimate of what came since."""
        if self._reported is not None and self._still_counted(history):
            return self._reported + estimate_messages(history[self._covered :])
        return self.estimate(system, history, tools)

    def ratio(self, tokens: int) -> float:
        """``tokens`` as a share of the window."""
        return tokens / self.profile.context_window

    def over_threshold(self, tokens: int) -> bool:
        """Whether a request of ``tokens`` should be compacted first."""
        return self.ratio(tokens) >= self.profile.compact_threshold

    def observe(
        self,
        usage: Usage,
        system: str,
        history: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        session_id: str,
        run_id: str | None,
        step: int,
    ) -> ContextWatermark:
        """Record a finished model call (its answer is ``history[-1]``) and return the watermark event."""
        if usage.input_tokens > 0:
            used, source = usage.input_tokens + usage.output_tokens, "provider"
            self._reported, self._last, self._covered = used, history[-1] if history else None, len(history)
        else:
            self._reported, self._last, self._covered = None, None, 0
            used, source = self.estimate(system, history, tools), "estimate"
        return self.event(used, session_id=session_id, run_id=run_id, step=step, source=source)

    def event(
        self, used: int, *, session_id: str, run_id: str | None, step: int = 0, source: str = "estimate"
    ) -> ContextWatermark:
        """A watermark event for ``used`` tokens."""
        return ContextWatermark(
            session_id=session_id,
            run_id=run_id,
            step=step,
            model=self.model,
            used_tokens=used,
            window=self.profile.context_window,
            ratio=round(self.ratio(used), 4),
            threshold=self.profile.compact_threshold,
            source="provider" if source == "provider" else "estimate",
        )

    def _still_counted(self, history: Sequence[Message]) -> bool:
        return 0 < self._covered <= len(history) and history[self._covered - 1] is self._last
