"""What the orchestration controller needs of the runtime: start child sessions, wait for them, record events.

The controller (:mod:`orchestrator.agents.orchestrate`) is written against :class:`Children`, a small protocol,
so that it runs the same over any implementation: :class:`FaceChildren` drives children through Loom's face
(a :class:`FaceClient` such as :class:`clients.loom.LoomClient`, in-process or a daemon's), and the tests run
it over a plain deterministic implementation. A child is named by its :class:`ChildHandle` (session and run),
which the controller records before it waits, so a restarted controller waits for the same child, resumed by
the host like any run, instead of starting another.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import anyio

from orchestrator.events import Event

__all__ = [
    "FINAL_RUN_STATUSES",
    "ChildError",
    "ChildHandle",
    "ChildOutcome",
    "ChildSpec",
    "Children",
    "FaceChildren",
    "FaceClient",
]

FINAL_RUN_STATUSES = frozenset({"completed", "failed", "cancelled"})
"""Run statuses a child's run does not leave (``interrupted`` and ``needs_review`` runs are resumed)."""


class ChildError(Exception):
    """A child could not be started (an unknown agent, a request its parent's bounds refuse); the message says why.

    Starting it again would fail the same way, so the controller does not retry it.
    """


@dataclass(frozen=True, slots=True)
class ChildSpec:
    """One child to start.

    Attributes:
        agent: The agent definition it runs as (``planner``, ``executor``, ``reviewer`` or a user's).
        goal: Its first message: its whole brief.
        timeout_s: Its run's own deadline; past it the run is cancelled and ends ``failed``.
        label: Who it is in the orchestration (``orch_1/parser/2/executor``), for titles and logs.
        max_steps: Its step budget, or None for the definition's (else the face's default).
    """

    agent: str
    goal: str
    timeout_s: float
    label: str
    max_steps: int | None = None


@dataclass(frozen=True, slots=True)
class ChildHandle:
    """A started child: its session and the run working on its goal."""

    session_id: str
    run_id: str


@dataclass(frozen=True, slots=True)
class ChildOutcome:
    """How a child's run ended: ``completed``, ``failed`` or ``cancelled``, its reason and its answer."""

    status: str
    final_text: str = ""
    reason: str = ""


class Children(Protocol):
    """The runtime as the controller sees it.

    A child is started in two steps, :meth:`create` then :meth:`start`, and the controller records each before
    the next: a crash between them leaves at most a session with no run (no work done twice), and one after
    :meth:`start` but before its record is found again with :meth:`find_run`.
    """

    async def create(self, spec: ChildSpec) -> str:
        """Create the child session (a child of the orchestrating session, as ``spec.agent``); its id.

        Raises:
            ChildError: The child was refused.
        """
        ...

    async def start(self, session_id: str, spec: ChildSpec) -> str:
        """Start the child's run on ``spec.goal`` with its deadline; return its run id at once.

        Raises:
            ChildError: The run was refused.
        """
        ...

    async def find_run(self, session_id: str) -> str | None:
        """The run a child session was started with, or None if it has none (it was never started)."""
        ...

    async def wait(self, child: ChildHandle, timeout_s: float) -> ChildOutcome | None:
        """The child's outcome once its run ends, or None if it has not within ``timeout_s``."""
        ...

    async def cancel(self, child: ChildHandle) -> None:
        """Cancel the child's run (nothing if it ended)."""
        ...

    async def append(self, events: Sequence[Event]) -> None:
        """Store events in the orchestrating session's log (then they are published, like any)."""
        ...


class FaceRun(Protocol):
    """The part of the face's ``RunInfo`` the adapter reads."""

    @property
    def run_id(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def final_text(self) -> str: ...


class FacePage(Protocol):
    """The part of the face's ``EventPage`` the adapter reads."""

    @property
    def events(self) -> Sequence[object]: ...
    @property
    def next_after_seq(self) -> int: ...


class FaceSession(Protocol):
    """The part of the face's ``SessionInfo`` the adapter reads."""

    @property
    def session_id(self) -> str: ...


class FaceClient(Protocol):
    """The face's tools the adapter calls, with the child-session arguments of issue 15 (``LoomClient``'s)."""

    async def create_session(  # noqa: D102
        self,
        cwd: str,
        *,
        model: str | None = None,
        headless: bool = False,
        parent_session_id: str | None = None,
        agent: str | None = None,
    ) -> FaceSession: ...
    async def send_message(  # noqa: D102
        self, session_id: str, text: str, *, max_steps: int = 50, timeout_s: float | None = None
    ) -> FaceRun: ...
    async def get_run(self, run_id: str, *, wait_s: float = 0) -> FaceRun: ...  # noqa: D102
    async def read_events(  # noqa: D102
        self, session_id: str, *, after_seq: int = 0, wait_s: float = 0, limit: int = 200
    ) -> FacePage: ...
    async def cancel_run(self, run_id: str) -> FaceRun: ...  # noqa: D102
    async def resume_run(self, run_id: str, *, wait_s: float = 0, headless: bool = False) -> FaceRun: ...  # noqa: D102


FIND_RUN_WAIT_S = 2.0
"""How long a child session with no run yet is watched for one (its run's first event is stored just after)."""
WAIT_SLICE_S = 30.0
"""One ``get_run`` long-poll: the face bounds each call (60 s), so a long wait is a loop of them."""


class FaceChildren:
    """:class:`Children` through Loom's face: each child a session whose parent is the orchestrating session.

    Args:
        client: A face client (``LoomClient``) to the host running the orchestrating session.
        session_id: The orchestrating session: the children's parent, whose log the events go to.
        append: How events reach that log (in-process, the host's event log; the face has no tool for it).
        headless: Start the children headless, what would ask is denied (a child of a headless parent is headless
            whatever this says).
        models: A model spec per agent name (``{"planner": "anthropic:claude-opus-4-5"}``); an agent not named
            runs on its definition's model, else its parent's.
        refusals: The exceptions by which the client says a tool refused (``clients.loom.FaceError``); they become
            :class:`ChildError`. Anything else (a broken connection) goes up as it is.
    """

    def __init__(
        self,
        client: FaceClient,
        session_id: str,
        append: Callable[[Sequence[Event]], Awaitable[None]],
        *,
        headless: bool = False,
        models: Mapping[str, str] | None = None,
        refusals: tuple[type[Exception], ...] = (),
    ) -> None:
        self.client = client
        self.refusals = refusals
        self.session_id = session_id
        self._append = append
        self.headless = headless
        self.models = dict(models or {})
        self._resumed: set[str] = set()

    async def create(self, spec: ChildSpec) -> str:
        """Create the child session (cwd the parent's) as ``spec.agent``.

        Raises:
            ChildError: The face refused it (its message says why: an unknown agent, wider than the parent).
        """
        try:
            session = await self.client.create_session(
                "",
                model=self.models.get(spec.agent),
                headless=self.headless,
                parent_session_id=self.session_id,
                agent=spec.agent,
            )
        except self.refusals as exc:
            raise ChildError(str(exc)) from exc
        return session.session_id

    async def start(self, session_id: str, spec: ChildSpec) -> str:
        """Send the child its goal with its deadline.

        Raises:
            ChildError: The face refused the message.
        """
        try:
            if spec.max_steps is None:
                run = await self.client.send_message(session_id, spec.goal, timeout_s=spec.timeout_s)
            else:
                run = await self.client.send_message(
                    session_id, spec.goal, max_steps=spec.max_steps, timeout_s=spec.timeout_s
                )
        except self.refusals as exc:
            raise ChildError(str(exc)) from exc
        return run.run_id

    async def find_run(self, session_id: str) -> str | None:
        """The child's first run, from the head of its log (a child session gets one run from the controller).

        ``send_message`` answers before the run's first event is stored, so a session with no run yet is watched
        for :data:`FIND_RUN_WAIT_S` before the answer is "never started".
        """
        deadline = anyio.current_time() + FIND_RUN_WAIT_S
        after = 0
        while True:
            left = max(0.0, deadline - anyio.current_time())
            page = await self.client.read_events(session_id, after_seq=after, limit=50, wait_s=min(left, 1.0))
            for event in page.events:
                if getattr(event, "type", None) in ("run_queued", "run_started"):
                    run_id = getattr(event, "run_id", None)
                    if isinstance(run_id, str) and run_id:
                        return run_id
            after = page.next_after_seq
            if left <= 0:
                return None

    async def wait(self, child: ChildHandle, timeout_s: float) -> ChildOutcome | None:
        """Poll ``get_run`` in bounded slices until the run ends or ``timeout_s`` passes.

        A run found ``interrupted`` (Loom restarted and did not resume it) is resumed, once, under its own id.
        """
        deadline = anyio.current_time() + timeout_s if math.isfinite(timeout_s) else math.inf
        while True:
            left = deadline - anyio.current_time()
            run = await self.client.get_run(child.run_id, wait_s=max(0.0, min(WAIT_SLICE_S, left)))
            if run.status in FINAL_RUN_STATUSES:
                return ChildOutcome(run.status, run.final_text, run.reason)
            if anyio.current_time() >= deadline:
                return None
            if run.status == "interrupted" and child.run_id not in self._resumed:
                # A restart without autoResume leaves the child's run interrupted: carry it on under its own id,
                # once (a refusal means another client resumed it first).
                self._resumed.add(child.run_id)
                with contextlib.suppress(*self.refusals):
                    await self.client.resume_run(child.run_id, headless=self.headless)
                continue
            if run.status in ("interrupted", "needs_review", "awaiting_approval"):
                await anyio.sleep(min(1.0, max(0.0, left)))  # get_run returns at once for these: do not spin

    async def cancel(self, child: ChildHandle) -> None:
        """Cancel the child's run through the face."""
        await self.client.cancel_run(child.run_id)

    async def append(self, events: Sequence[Event]) -> None:
        """Hand the events to the log callable given at construction."""
        await self._append(events)
