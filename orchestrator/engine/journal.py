"""What a run on the DBOS engine records between its steps, so that replaying it never stores anything twice.

On the DBOS engine a run is a workflow (:mod:`orchestrator.engine.workflow`): when its worker dies, another worker
runs the workflow function again from the top, and DBOS hands back the recorded result of every step already
done instead of doing it again. Loom's loop stores events between its model and tool calls (an assistant message
and the calls it starts, an approval's request, the run's end). Each such append is made a DBOS step of its own
here (``loom.journal``): a replay gets its recorded result and stores nothing, and what the replay would have
stored is compared with what was stored then, so that a replay taking another path is an error naming the step
(:class:`ReplayDiverged`), never a silent second run of it.

A step is at least once on every engine: a worker may die after a step's effect and before DBOS recorded the step.
The first step body that runs in a workflow execution after others were replayed is the one that may have been
cut off (the *frontier*); :class:`RunJournal` tells the steps which one it is, so that an append whose events are
already stored is not made again and a tool call that may have run already goes to review
(:mod:`orchestrator.engine.dbos_steps`).
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.events import Event, ToolCallFinished, ToolCallStarted
from orchestrator.store.eventlog import EventLog

JOURNAL_STEP = "loom.journal"


class Fenced(BaseException):
    """This worker no longer holds the run (another took it over while this one was slow): it must not act for it.

    A BaseException: nothing of the run may be recorded by this execution, not even its end.
    """


class ReplayDiverged(BaseException):
    """A replayed run asked for a different step than the one its journal recorded at that place.

    A BaseException, like a cancellation: the loop's and the session's handlers of ordinary failures must not
    record it as the run's end through the journal that just diverged; the workflow records it (see
    :mod:`orchestrator.engine.workflow`).
    """


@dataclass(slots=True)
class RunJournal:
    """The state of one execution of one run's workflow (a first run, or a replay after a worker died)."""

    run_id: str
    session_id: str
    recovering: bool
    """The store already had this run's start when the execution began: some steps may replay."""
    ordinal: int = 0
    """Steps asked for so far in this execution, journal and calls alike: the place a divergence is reported at."""
    crossed: bool = False
    """A step body has run in this execution: every step from here on is new (see :meth:`at_frontier`)."""
    replayed: int = 0
    """Steps whose recorded result this execution was given instead of running them."""
    ran: list[str] = field(default_factory=list[str])
    """The kinds of the steps whose bodies ran in this execution, in order (what a test or a log can check)."""
    stored: set[str] = field(default_factory=set[str])
    """The shapes (:func:`shape`) of the run's events already in the store when this execution began: an append of
    any of them is a step an earlier execution made, whatever DBOS recorded of it."""
    started: set[str] = field(default_factory=set[str])
    """Calls the store shows started (by an earlier execution) when this one began."""
    finished: dict[str, ToolCallFinished] = field(default_factory=dict[str, ToolCallFinished])
    """Their stored results, by call id."""
    fence: Callable[[], Awaitable[bool]] | None = None
    """Whether this worker still holds the run, asked before each effect (None: not checked)."""

    async def check_fence(self, what: str) -> None:
        """Raise :class:`Fenced` when another worker holds the run now.

        A worker counted silent (slow, not dead) is taken over while it may still be running; its next effect would
        happen twice. DBOS's own check comes only after a step's body, when the effect is done, so the step asks
        first. What is left is the moment between this check and the effect, milliseconds instead of a heartbeat.
        """
        if self.fence is not None and not await self.fence():
            raise Fenced(f"run {self.run_id}: another worker holds it now; {what} was not made here")

    def remember(self, events: Sequence[Event]) -> None:
        """Take the run's stored events, as this execution begins, as what earlier executions did."""
        for event in events:
            self.stored.update(shape([event]))
            if isinstance(event, ToolCallStarted):
                self.started.add(event.call_id)
            elif isinstance(event, ToolCallFinished):
                self.finished[event.call_id] = event

    def next_place(self) -> int:
        """Number the next step asked for."""
        self.ordinal += 1
        return self.ordinal

    def at_frontier(self, kind: str) -> bool:
        """Called by a step body as it starts; True for the first body to run in a recovering execution.

        That step is the one the dead worker may have been in the middle of: its effect may be stored already.
        """
        first = self.recovering and not self.crossed
        self.crossed = True
        self.ran.append(kind)
        return first


_CURRENT: contextvars.ContextVar[RunJournal | None] = contextvars.ContextVar("loom_run_journal", default=None)


def current() -> RunJournal | None:
    """The journal of the workflow this task runs in, or None (embedded, or inside a step's own body)."""
    return _CURRENT.get()


@contextlib.contextmanager
def journalling(journal: RunJournal | None) -> Iterator[None]:
    """Route this task's appends (and its children's) through ``journal``; None turns it off (a step's body)."""
    token = _CURRENT.set(journal)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def shape(events: Sequence[Event]) -> list[str]:
    """What identifies a batch across a replay: each event's type with its run, step and call or approval.

    Timestamps, durations and texts are left out: they may differ between two executions of the same path (a
    tool's duration, say) without the path differing; the types, steps and ids may not.
    """
    out: list[str] = []
    for e in events:
        parts = [e.type, str(getattr(e, "run_id", "") or ""), str(getattr(e, "step", "") or "")]
        for name in ("call_id", "approval_id", "tool"):
            value = getattr(e, name, None)
            if value:
                parts.append(f"{name}={value}")
        out.append(" ".join(parts))
    return out


def digest(kind: str, detail: Any) -> str:
    """A short hash of a step's kind and what identifies its input, compared on replay."""
    text = json.dumps([kind, detail], sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def check_replay(journal: RunJournal, place: int, kind: str, wanted: str, recorded: dict[str, Any]) -> None:
    """Raise :class:`ReplayDiverged` when a step's recorded identity is not the one the replay asks for."""
    if recorded.get("digest") == wanted:
        return
    raise ReplayDiverged(
        f"run {journal.run_id}: replay diverged from its journal at step {place} ({kind}): it recorded "
        f"{recorded.get('what') or recorded.get('kind')!r} there, and the replay asked for something else. "
        "The run was not continued; see `loom show` for what it did, and start it again if it should go on"
    )


class JournalledEventLog(EventLog):
    """The worker's event log: an append made inside a run's workflow (between steps) is a DBOS step.

    Elsewhere (a session opening, a server's state changing, inside a step's own body) it appends as usual.
    """

    async def append(self, *events: Event) -> None:
        """See :meth:`EventLog.append`; inside a workflow, once per workflow whatever the replays."""
        journal = current()
        if journal is None or not events:
            await super().append(*events)
            return
        from orchestrator.engine.dbos_steps import journal_append

        await journal_append(self, journal, events)

    async def append_now(self, *events: Event) -> None:
        """Append outside the journal (a step's body, or what the workflow records about itself)."""
        await super().append(*events)
