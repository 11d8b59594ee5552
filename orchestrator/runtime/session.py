"""A session: one conversation with its history, model and tools, whose runs it serialises.

A run is one user message answered by the agent loop; its final status is recorded even when it is
cancelled or fails. The session is also where its context is managed between runs: the system
prompt assembled for each run, compaction on request and model switches (see docs/context.md).

An open session keeps its history in memory: each run appends the user's message to it and the loop
appends the rest, so a run never re-reads what the session already holds, and the token estimates
(running totals in the meter) and the approvals for the session carry over from run to run. The store
stays the truth: a reopened session rebuilds the same history from its events, and so does an open one
whenever a run ends in a way that may have left the two apart (cancelled mid-step, a store or internal
failure, a review left open).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from orchestrator.config import LoopSettings
from orchestrator.context.assembly import base_prompt
from orchestrator.context.compactor import KEEP_SHARE, CompactionReport, Compactor, SwitchError
from orchestrator.context.history import rebuild_history, user_turn
from orchestrator.context.prompt_cache import MemoryScope, PromptCache
from orchestrator.context.watermark import ContextMeter
from orchestrator.events import (
    CompactionFailed,
    CompactionTrigger,
    ContextCompacted,
    Event,
    ModelRetry,
    ModelSwitched,
    Notice,
    RunFinished,
    RunStarted,
    RunStatus,
    UserMessage,
)
from orchestrator.hub.pool import Hub
from orchestrator.loop.advisor import Advisor
from orchestrator.loop.approvals import Approvals
from orchestrator.loop.loop import LoopResult, RunContext, run_loop
from orchestrator.loop.resume import RESUMABLE, ResumeError, find_resume_point, resume_loop
from orchestrator.loop.steps import EmbeddedSteps, Steps, complete
from orchestrator.messages import Message, TextBlock
from orchestrator.models.base import Model, ModelError, ToolSpec
from orchestrator.models.profiles import ModelProfile, ProfileSettings, profile_for
from orchestrator.models.retry import RetryingModel, RetryPolicy
from orchestrator.policy.narrowing import Bounds
from orchestrator.policy.protected import Protected
from orchestrator.policy.rules import Rule
from orchestrator.protocol import STORE_FAILURE
from orchestrator.runtime.lineage import Lineage
from orchestrator.runtime.owner import owner_alive, this_process
from orchestrator.runtime.runs import DEFAULT_MAX_STEPS, RunResult, new_id
from orchestrator.runtime.todo import SessionPlan
from orchestrator.store.eventlog import EventLog
from orchestrator.store.interface import StoreError
from orchestrator.store.snapshots import FileSnapshots

if TYPE_CHECKING:
    from orchestrator.hooks import SessionHooks

__all__ = ["DEFAULT_MAX_STEPS", "RunResult", "Session", "new_id"]

logger = logging.getLogger(__name__)


class Session:
    """One conversation: history, model and tools. Runs are serialised."""

    def __init__(
        self,
        session_id: str,
        cwd: Path,
        model: Model,
        hub: Hub,
        log: EventLog,
        *,
        mode: str = "bypass",
        history: list[Message] | None = None,
        rules: Sequence[Rule] = (),
        headless: bool = False,
        home: Path | None = None,
        profiles: Mapping[str, ProfileSettings] | None = None,
        protected: Protected | None = None,
        memory: MemoryScope | None = None,
        bounds: Bounds | None = None,
        lineage: Lineage | None = None,
        advisor: Advisor | None = None,
        advisor_mode: str | None = None,
        plan: SessionPlan | None = None,
        loop: LoopSettings | None = None,
    ) -> None:
        self.id = session_id
        self.cwd = cwd
        self.model = model
        self.hub = hub
        self.log = log
        self.history: list[Message] = history if history is not None else []
        if bounds is not None:  # a child: its bounds were narrowed from its parent's
            self.approvals = Approvals(session_id, log, bounds)
        else:
            self.approvals = Approvals.top_level(
                session_id, log, mode, rules=rules, cwd=str(cwd), headless=headless, protected=protected
            )
        self.advisor = advisor
        """Reviews each batch of tool calls before policy (None: no review)."""
        self.advisor_mode = advisor_mode
        """The session's own advisor mode, if it chose one (its children run with it too)."""
        self.plan = plan if plan is not None else SessionPlan(session_id, log)
        """The model's plan (the ``todo`` tool), as it now stands."""
        self.loop = loop or LoopSettings()
        """When a run repeating itself is told and stopped (the config's ``loop``; the defaults when it has none)."""
        self.lineage = lineage or Lineage()
        """Where the session sits in the tree of sessions (a child's parent and ancestors, its agent's role)."""
        self.endings: dict[str, tuple[RunStatus, str]] = {}
        """By run id, set just before the host cancels a run for a reason of its own (its timeout, its parent's end):
        the run then ends with this status and reason instead of ``cancelled``."""
        self.stopping: str | None = None
        """Set when the runtime is shutting down: a run cancelled then is ``interrupted``, not ``cancelled``."""
        self._lock = anyio.Lock()
        self.snapshots: FileSnapshots | None = None
        """Where the fs server's changes are snapshotted for rewind (set by the runtime)."""
        self.home = home
        """Loom's home, for user instruction files and skills; None leaves the prompt at Loom's base."""
        self.prompts = PromptCache(cwd, home, memory) if home is not None else None
        """The system prompt, assembled again when an instruction file, a skill or the memory (``memory``) changed."""
        self.profiles = dict(profiles or {})
        self.meter = ContextMeter(model.name, self._profile(model))
        self.compactor = Compactor(session_id, log, self.meter)
        self.reopened_events: list[Event] | None = None
        """The events this session was reopened from, kept until its first run or resume (see ``resume``)."""
        self._told: set[str] = set()
        """Problems with instruction files or skills already reported in this session (once is enough)."""
        self._stale = False
        """The history in memory may differ from what the store rebuilds (a run ended mid-step): rebuild it first."""
        self.hooks: SessionHooks | None = None
        """The session's hooks (set by the runtime when a hooks file has any; None costs nothing)."""
        self.steps: Steps | None = None
        """Where its runs' model and tool calls happen; None: in this process (a DBOS worker sets its own)."""
        self.owner: Callable[[], str] = this_process
        """Who is recorded as driving its runs (a DBOS worker records ``worker:ID``)."""

    @property
    def busy(self) -> bool:
        """Whether a run, a resume, a compaction or a model switch holds the session right now."""
        return self._lock.locked()

    async def run(
        self,
        text: str,
        *,
        max_steps: int = DEFAULT_MAX_STEPS,
        retry: RetryPolicy | None = None,
        run_id: str | None = None,
    ) -> RunResult:
        """Answer one user message; returns when the run has a final status.

        Cancellation (Ctrl-C, a client's cancel) is recorded as a ``cancelled`` run and re-raised.

        Raises:
            orchestrator.store.interface.StoreError: the event log could not be written; the run is lost.
        """
        run_id = run_id or new_id("r")
        self.reopened_events = None  # only a resume right after reopening uses the copy
        async with self._lock:
            # UserPromptSubmit hooks see the prompt before it is stored: a blocked prompt never reaches the model.
            prompted = self.hooks is not None and self.hooks.has("UserPromptSubmit")
            await self.log.append(
                RunStarted(
                    session_id=self.id, run_id=run_id, model=self.model.name, max_steps=max_steps, owner=self.owner()
                ),
                *([] if prompted else [UserMessage(session_id=self.id, run_id=run_id, text=text)]),
            )

            async def body(ctx: RunContext) -> LoopResult:
                # The history in memory is what the store rebuilds (the latest compaction and what follows it),
                # so the message just stored is appended as the rebuild would place it; only a history that a
                # run left apart from the store is read again. Inside ``_drive``, so that a cancel landing here
                # still ends the run on record.
                added: list[TextBlock] = []
                if prompted and self.hooks is not None:
                    refused, added = await self.hooks.submit_prompt(ctx, text)
                    if refused is not None:
                        return refused
                if self._stale:
                    await self._rebuild()
                else:
                    self.history.append(user_turn(text) if not added else Message(role="user", content=[
                        TextBlock(text=text), *added]))  # fmt: skip
                return await run_loop(ctx)

            return await self._drive(self._context(run_id, max_steps), retry, body)

    async def resume(self, run_id: str, *, retry: RetryPolicy | None = None, headless: bool | None = None) -> RunResult:
        """Continue an ``interrupted`` (or ``needs_review``) run of this session under its own id.

        Finished tool calls are reused, unfinished read-only or idempotent ones run again, other
        unfinished ones are reviewed (see :mod:`orchestrator.loop.resume`). ``headless`` (default: the
        session's own setting) means nobody can review: such a run ends ``needs_review``.

        Raises:
            orchestrator.loop.resume.ResumeError: the run cannot be resumed (the message says why).
            orchestrator.store.interface.StoreError: the event log could not be written.
        """
        headless = self.approvals.headless if headless is None else headless
        async with self._lock:
            record = await self.log.store.get_run(run_id)
            if record is None or record.session_id != self.id:
                raise ResumeError(f"no run {run_id!r} in session {self.id}")
            point = find_resume_point(await self._events_for_resume(), run_id)
            if point.resumed_by and point.resumed_by != this_process() and owner_alive(point.resumed_by):
                raise ResumeError(f"run {run_id} is already being resumed by process {point.resumed_by}")
            if record.status not in RESUMABLE:
                if record.status == "running":
                    raise ResumeError(f"run {run_id} is still running; only an interrupted run can be resumed")
                raise ResumeError(f"run {run_id} is {record.status}; only an interrupted run can be resumed")

            async def body(ctx: RunContext) -> LoopResult:
                return await resume_loop(ctx, point, headless=headless)

            return await self._drive(self._context(run_id, point.max_steps), retry, body)

    async def _events_for_resume(self) -> list[Event]:
        """The session's events: those it was just reopened from if nothing was stored since, else read again.

        Resuming right after a restart is the common case, and a long session's read is most of what a
        resume costs (figure 10).
        """
        events, self.reopened_events = self.reopened_events, None
        if events:
            record = await self.log.store.get_session(self.id)
            if record is not None and record.last_seq == events[-1].seq:
                return events
        return await self.log.store.read_events(self.id)

    async def system_prompt(self, run_id: str | None = None) -> str:
        """The system prompt as of now: instruction files, skills and memory as they are (see ``prompts``)."""
        hooked = self.hooks.prompt_addition() if self.hooks is not None else ""
        if self.prompts is None:
            return base_prompt(self.cwd) + self.lineage.role_prompt() + hooked
        prompt = await self.prompts.prompt(self.hub)
        new = [p for p in prompt.problems if p not in self._told]
        if new:
            self._told.update(new)
            await self.log.append(*(Notice(session_id=self.id, run_id=run_id, level="warning", text=p) for p in new))
        return prompt.text + self.lineage.role_prompt() + hooked

    def _context(self, run_id: str, max_steps: int) -> RunContext:
        if self.snapshots is not None:
            self.snapshots.run_id = run_id  # files changed from now on are snapshotted under this run
        return RunContext(
            session_id=self.id,
            run_id=run_id,
            model=self.model,
            hub=self.hub,
            log=self.log,
            system="",  # assembled in ``_drive``, where a cancel or a failure is recorded as the run's end
            history=self.history,
            max_steps=max_steps,
            approvals=self.approvals,
            compactor=self.compactor,
            advisor=self.advisor,
            loop=self.loop,
            hooks=self.hooks,
            steps=self.steps or EmbeddedSteps(),
        )

    def _profile(self, model: Model) -> ModelProfile:
        return profile_for(model.name, self.profiles, own_window=getattr(model, "context_window", None))

    async def compact(self, *, focus: str = "", preview: bool = False) -> CompactionReport:
        """Compact the history now (``preview``: only estimate what it would do, without calling the model).

        Waits for a run in progress to end first (the session serialises runs and compactions).

        Raises:
            orchestrator.store.interface.StoreError: the outcome could not be recorded.
        """
        async with self._lock:
            await self._rebuild_if_stale()
            system = await self.system_prompt()
            tools = [t.spec for t in self.hub.tools]
            before = self.meter.used(system, self.history, tools)
            if preview:
                found = await self.compactor.preview(system=system, tools=tools)
                if found is None:
                    return CompactionReport.of(None, before)
                return CompactionReport("preview", before, found.tokens_after, preview=found)
            event = await self._compact_between_runs(system, tools, "manual", focus=focus)
            return CompactionReport.of(event, before)

    async def switch_model(self, model: Model) -> CompactionReport | None:
        """Use ``model`` from the next run on, compacting first if the history would crowd its window.

        Returns:
            The compaction that ran first, if one was needed.

        Raises:
            SwitchError: the history does not fit the new model's window and could not be compacted.
        """
        async with self._lock:
            await self._rebuild_if_stale()
            profile = self._profile(model)
            system = await self.system_prompt()
            tools = [t.spec for t in self.hub.tools]
            used = self.meter.used(system, self.history, tools)
            report: CompactionReport | None = None
            if used / profile.context_window >= profile.compact_threshold:
                # The current model summarises: it is the one whose window still holds the whole history. What
                # is kept must leave the new, smaller window room to work in.
                event = await self._compact_between_runs(
                    system, tools, "model_switch", keep_tokens=int(profile.context_window * KEEP_SHARE)
                )
                report = CompactionReport.of(event, used)
                used = self.meter.used(system, self.history, tools)
                if used > profile.context_window:
                    raise SwitchError(
                        f"the history ({used:,} tokens) does not fit {model.name}'s window "
                        f"({profile.context_window:,}) and compaction could not shrink it enough "
                        f"({report.detail}); the session keeps {self.model.name}"
                    )
            previous = self.model.name
            # The gauge every client shows is measured against the new window from now on.
            gauge = ContextMeter(model.name, profile).event(used, session_id=self.id, run_id=None)
            await self.log.append(
                ModelSwitched(session_id=self.id, model=model.name, previous=previous, window=profile.context_window),
                gauge,
            )
            self.model = model
            self.meter.reset(model.name, profile)
            if self.advisor is not None and self.advisor.follows_session:
                self.advisor.model = model  # an advisor on the session's own model follows it
            return report

    async def _compact_between_runs(
        self,
        system: str,
        tools: Sequence[ToolSpec],
        trigger: CompactionTrigger,
        *,
        focus: str = "",
        keep_tokens: int | None = None,
    ) -> ContextCompacted | CompactionFailed | None:
        """Compact with the session's model (transient errors retried) outside any run; the caller holds the lock."""
        model = self._retrying(None, None)
        return await self.compactor.compact(
            self.history,
            system=system,
            tools=tools,
            run_id=None,
            trigger=trigger,
            focus=focus,
            keep_tokens=keep_tokens,
            call_model=lambda request: complete(model, request),
        )

    async def _drive(
        self, ctx: RunContext, retry: RetryPolicy | None, body: Callable[[RunContext], Awaitable[LoopResult]]
    ) -> RunResult:
        """Run ``body`` to a final status and record it, whatever happens (the caller holds the lock)."""
        ctx.model = self._retrying(ctx, retry)
        try:
            ctx.system = await self.system_prompt(ctx.run_id)
            result = await body(ctx)
        except anyio.get_cancelled_exc_class():
            self._stale = True  # stopped anywhere: calls without results, a compaction half applied
            if self.stopping:
                ended = LoopResult("interrupted", self.stopping, "", ctx.step)
            elif ctx.run_id in self.endings:
                status, reason = self.endings[ctx.run_id]
                ended = LoopResult(status, reason, "", ctx.step)
            else:
                ended = LoopResult("cancelled", "cancelled", "", ctx.step)
            with anyio.CancelScope(shield=True):
                await self._finish(ctx, ended)
            raise
        except ModelError as exc:
            result = LoopResult("failed", f"model error: {exc}", "", ctx.step)
        except StoreError as exc:
            # The store refused a write (a full disk, say); the run must not stay "running" in the store for ever.
            # Recording its end may fail the same way, and then the original error is what the caller hears.
            result = LoopResult("failed", f"{STORE_FAILURE}{exc}", "", ctx.step)
            self._stale = True
            try:
                await self._finish(ctx, result)
            except StoreError:
                raise exc from None
            raise
        except Exception as exc:
            logger.exception("run %s failed", ctx.run_id)
            result = LoopResult("failed", f"internal error: {type(exc).__name__}: {exc}", "", ctx.step)
            self._stale = True
        await self._finish(ctx, result)
        return RunResult(ctx.run_id, result.status, result.reason, result.final_text, result.steps)

    def _retrying(self, ctx: RunContext | None, policy: RetryPolicy | None) -> Model:
        async def on_retry(attempt: int, delay_s: float, error: ModelError) -> None:
            await self.log.append(
                ModelRetry(
                    session_id=self.id,
                    run_id=ctx.run_id if ctx is not None else "",
                    step=ctx.step if ctx is not None else 0,
                    attempt=attempt,
                    delay_s=round(delay_s, 3),
                    error=str(error),
                )
            )

        return RetryingModel(self.model, policy or RetryPolicy(), on_retry=on_retry)

    async def _finish(self, ctx: RunContext, result: LoopResult) -> None:
        unstored, ctx.unstored = ctx.unstored, []
        r = result
        ended = RunFinished(session_id=self.id, run_id=ctx.run_id, status=r.status, reason=r.reason,
                            final_text=r.final_text, steps=r.steps)  # fmt: skip
        try:
            await self.log.append(*unstored, ended)
        except StoreError as exc:
            if not unstored:
                raise
            # The final answer could not be stored (a full disk, say): the run fails on record, as it did when the
            # answer had a batch of its own, and the caller hears the store's error.
            self._stale = True
            try:
                await self._finish(ctx, LoopResult("failed", f"{STORE_FAILURE}{exc}", "", ctx.step))
            except StoreError:
                raise exc from None
            raise
        if result.status == "needs_review":
            self._stale = True  # the reviewed calls' turn is left open in memory; the store closes it
        if self._stale and not self.stopping:
            # Stopped mid-step, the history may hold tool calls without results, which no model accepts:
            # take it from the store, as a reopened session would. (A session that is stopping is not used again.)
            try:
                await self._rebuild()
            except StoreError:
                logger.warning("session %s: history not rebuilt after run %s; the next run will", self.id, ctx.run_id)

    async def _rebuild(self) -> None:
        """Replace the history in memory by the one the store rebuilds (the caller holds the lock)."""
        self.history[:] = rebuild_history(await self.log.store.read_context_events(self.id))
        self._stale = False

    async def _rebuild_if_stale(self) -> None:
        if self._stale:
            await self._rebuild()
