"""When and how a session compacts: the threshold check before every model call, and compaction on request.

:mod:`orchestrator.context.compaction` decides what to replace and checks the summary; this module decides
*when*, runs the summary's model call through the loop's step seam, and records the outcome. The
check runs before every model call of a run, mid-turn included, because one turn of tool results
can fill a window on its own. A compaction that fails (its summary failed the checks twice, or the
model call failed) keeps the history as it is and says so, and is not tried again in the same run:
every model call paying for two failing summaries would be worse than a full context.

After a compaction the session's history is rebuilt from the store, so the model sees exactly what
a reopened session would: the summary, then the events it kept. The model's plan is recorded again with
the compaction, so that the summary's turn shows it verbatim (:mod:`orchestrator.context.plan`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from orchestrator.context.compaction import CompactionPreview, compact, preview_compaction
from orchestrator.context.history import rebuild_history
from orchestrator.context.plan import carry_plan
from orchestrator.context.tokens import estimate_overhead
from orchestrator.context.watermark import ContextMeter
from orchestrator.events import CompactionFailed, CompactionTrigger, ContextCompacted, Notice
from orchestrator.messages import Message
from orchestrator.models.base import ModelRequest, ModelResponse, ToolSpec
from orchestrator.store.eventlog import EventLog

if TYPE_CHECKING:
    from orchestrator.hooks import SessionHooks

KEEP_SHARE = 0.25
"""The newest part of the history kept as it is, as a share of the window: recent detail matters most."""

CallModel = Callable[[ModelRequest], Awaitable[ModelResponse]]


class SwitchError(Exception):
    """A model switch was refused: the history does not fit the new model's window; the message says why."""


@dataclass(frozen=True, slots=True)
class CompactionReport:
    """What a compaction request did, as a face reports it."""

    status: Literal["compacted", "failed", "nothing_to_compact", "preview"]
    tokens_before: int
    tokens_after: int
    detail: str = ""
    """The failure's reason, or what was dropped."""
    event: ContextCompacted | CompactionFailed | None = None
    preview: CompactionPreview | None = None

    @classmethod
    def of(cls, event: ContextCompacted | CompactionFailed | None, before: int) -> CompactionReport:
        """The report of a compaction that ran (``before``: the tokens in use when it was asked for)."""
        if event is None:
            return cls("nothing_to_compact", before, before, "the history is too short to compact")
        if isinstance(event, CompactionFailed):
            return cls("failed", before, before, event.reason, event)
        detail = (
            f"replaced {event.dropped_messages} messages ({event.dropped_tool_calls} tool calls, events "
            f"{event.dropped_from_seq}-{event.dropped_to_seq}) with a summary"
        )
        return cls("compacted", event.tokens_before, event.tokens_after, detail, event)


class Compactor:
    """Compaction for one session; the session's lock (or its running run) serialises calls."""

    def __init__(self, session_id: str, log: EventLog, meter: ContextMeter) -> None:
        self.session_id = session_id
        self.log = log
        self.meter = meter
        self._gave_up: set[str] = set()
        """Runs whose automatic compaction failed: not tried again in them."""
        self.hooks: SessionHooks | None = None
        """The session's hooks: PreCompact fires before each compaction (None: no hooks)."""

    def keep_tokens(self) -> int:
        """How much recent history a compaction keeps as it is."""
        return int(self.meter.profile.context_window * KEEP_SHARE)

    async def before_model_call(
        self,
        history: list[Message],
        *,
        system: str,
        tools: Sequence[ToolSpec],
        run_id: str,
        call_model: CallModel,
    ) -> ContextCompacted | CompactionFailed | None:
        """Compact first if the next request would pass the threshold (the loop calls this every step)."""
        used = self.meter.used(system, history, tools)
        if not self.meter.over_threshold(used) or run_id in self._gave_up:
            return None
        event = await self.compact(
            history, system=system, tools=tools, run_id=run_id, trigger="auto", call_model=call_model
        )
        if isinstance(event, CompactionFailed):
            self._gave_up.add(run_id)
        return event

    async def compact(
        self,
        history: list[Message],
        *,
        system: str,
        tools: Sequence[ToolSpec],
        run_id: str | None,
        trigger: CompactionTrigger,
        call_model: CallModel,
        focus: str = "",
        keep_tokens: int | None = None,
    ) -> ContextCompacted | CompactionFailed | None:
        """Summarise the older history, record the outcome, and on success replace ``history`` in place.

        ``keep_tokens`` (default: a share of this model's window) is how much recent history stays as it is.

        Returns:
            The recorded event, or None when there was nothing old enough to replace.

        Raises:
            orchestrator.store.interface.StoreError: the outcome could not be recorded.
        """
        if self.hooks is not None:
            await self.hooks.pre_compact(trigger, focus, run_id)
        events = await self.log.store.read_context_events(self.session_id)
        event = await compact(
            events,
            call_model=call_model,
            session_id=self.session_id,
            run_id=run_id,
            trigger=trigger,
            focus=focus,
            keep_tokens=self.keep_tokens() if keep_tokens is None else keep_tokens,
            overhead_tokens=estimate_overhead(system, tools),
        )
        if event is None:
            return None
        if isinstance(event, CompactionFailed):
            notice = Notice(
                session_id=self.session_id, run_id=run_id, level="warning", text=f"compaction failed: {event.reason}"
            )
            await self.log.append(event, notice)
            return event
        watermark = self.meter.event(event.tokens_after, session_id=self.session_id, run_id=run_id)
        carried = carry_plan(events, event)
        await self.log.append(event, watermark, *carried)
        # Only once the store has it: a compaction that was not recorded must not change what the model sees.
        history[:] = rebuild_history([*events, event, *carried])
        self.meter.reset()
        return event

    async def preview(self, *, system: str, tools: Sequence[ToolSpec]) -> CompactionPreview | None:
        """What a compaction would drop and keep, estimated without calling the model."""
        events = await self.log.store.read_context_events(self.session_id)
        return preview_compaction(
            events, keep_tokens=self.keep_tokens(), overhead_tokens=estimate_overhead(system, tools)
        )
