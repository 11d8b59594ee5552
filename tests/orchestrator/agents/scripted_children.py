"""A plain, deterministic implementation of the controller's ``Children`` protocol, for the graph's tests.

Each child's run is a task of this object's task group that plays an :class:`Answer` chosen by the test's
``script(spec)``: it answers after an optional gate opens, or hangs until its own deadline (then it ends
``failed``, "timed out after ...", as Loom's runs do), or until it is cancelled. Events are numbered as a
session's store would number them. Children outlive an :class:`Orchestrator` that is stopped, as a host's runs
outlive a crashed controller, so a second controller can resume from :attr:`ScriptedChildren.events`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Self

import anyio

from orchestrator.agents.children import ChildError, ChildHandle, ChildOutcome, ChildSpec
from orchestrator.events import Event


@dataclass
class Answer:
    """How one child's run goes."""

    text: str = ""
    status: str = "completed"
    reason: str = ""
    hang: bool = False
    """Never answer: the run ends at its deadline, or when cancelled."""
    gate: anyio.Event | None = None
    """Answer only once this is set."""
    refuse: str = ""
    """Refuse to create the child, with this message (as the face refuses an unknown agent)."""
    die: str = ""
    """``after_create`` or ``after_start``: the process dies right after that step (:class:`ProcessDied`), once."""


class ProcessDied(Exception):
    """Stands for Loom's process dying: what was recorded stays, nothing after it runs."""


@dataclass
class _Run:
    spec: ChildSpec
    answer: Answer
    done: anyio.Event = field(default_factory=anyio.Event)
    outcome: ChildOutcome | None = None
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)


def role_of(spec: ChildSpec) -> tuple[str, int, str]:
    """(task id or "plan", attempt, role) from a child's label ``orch/TASK/ATTEMPT/ROLE`` or ``orch/plan/N``."""
    parts = spec.label.split("/")
    if parts[1] == "plan":
        return "plan", int(parts[2]), "planner"
    return parts[1], int(parts[2]), parts[3]


class ScriptedChildren:
    """Children whose runs play a script; records what was spawned, what ran at once, what was cancelled."""

    def __init__(self, script: Callable[[ChildSpec], Answer]) -> None:
        self.script = script
        self.events: list[Event] = []
        self.spawned: list[ChildSpec] = []
        self.cancelled: list[str] = []
        self.running = 0
        self.max_running = 0
        self.created: list[str] = []
        self._runs: dict[str, _Run] = {}
        self._sessions: dict[str, str] = {}
        self._answers: dict[str, Answer] = {}
        self._died: set[tuple[str, str]] = set()
        self._changed = anyio.Event()
        self._tg = anyio.create_task_group()

    async def __aenter__(self) -> Self:
        await self._tg.__aenter__()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        self._tg.cancel_scope.cancel()
        return await self._tg.__aexit__(kind, exc, tb)

    async def until(self, condition: Callable[[], bool]) -> None:
        """Return once ``condition()`` holds, checked whenever an event is appended or a run starts or ends."""
        while not condition():
            await self._changed.wait()

    def _change(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    def spawned_roles(self) -> list[tuple[str, int, str]]:
        """Every child run started, as (task, attempt, role), in order."""
        return [role_of(spec) for spec in self.spawned]

    async def create(self, spec: ChildSpec) -> str:
        answer = self.script(spec)
        if answer.refuse:
            raise ChildError(answer.refuse)
        session_id = f"child{len(self.created) + 1}"
        self.created.append(session_id)
        self._answers[session_id] = answer
        self._die(spec, answer, "after_create")
        return session_id

    async def start(self, session_id: str, spec: ChildSpec) -> str:
        answer = self._answers[session_id]  # the script is asked once per child, when its session is created
        self.spawned.append(spec)
        run_id = f"run{len(self.spawned)}"
        run = self._runs[run_id] = _Run(spec, answer)
        self._sessions[session_id] = run_id
        self._tg.start_soon(self._play, run)
        self._die(spec, answer, "after_start")
        return run_id

    async def find_run(self, session_id: str) -> str | None:
        return self._sessions.get(session_id)

    def _die(self, spec: ChildSpec, answer: Answer, step: str) -> None:
        if answer.die == step and (spec.label, step) not in self._died:
            self._died.add((spec.label, step))
            raise ProcessDied(f"died {step} of {spec.label}")

    async def _play(self, run: _Run) -> None:
        answer = run.answer
        self.running += 1
        self.max_running = max(self.max_running, self.running)
        self._change()
        try:
            with run.scope:
                with anyio.move_on_after(run.spec.timeout_s) as deadline:
                    if answer.hang:
                        await anyio.sleep_forever()
                    if answer.gate is not None:
                        await answer.gate.wait()
                    await anyio.sleep(0.001)  # an answer takes a moment: siblings really overlap
                    run.outcome = ChildOutcome(answer.status, answer.text, answer.reason)
                if deadline.cancelled_caught:
                    run.outcome = ChildOutcome("failed", "", f"timed out after {run.spec.timeout_s:g} s")
            if run.scope.cancelled_caught:
                run.outcome = ChildOutcome("cancelled", "", "cancelled")
        finally:
            self.running -= 1
            run.done.set()
            self._change()

    async def wait(self, child: ChildHandle, timeout_s: float) -> ChildOutcome | None:
        run = self._runs[child.run_id]
        with anyio.move_on_after(timeout_s):
            await run.done.wait()
        return run.outcome

    async def cancel(self, child: ChildHandle) -> None:
        self.cancelled.append(child.run_id)
        self._runs[child.run_id].scope.cancel()

    async def append(self, events: Sequence[Event]) -> None:
        for event in events:
            self.events.append(event.model_copy(update={"seq": len(self.events) + 1}))
        self._change()
