"""What the goal controller needs of Loom's face, over a :class:`clients.loom.LoomClient`.

Children are started and awaited as an orchestration's are (:class:`~orchestrator.agents.children.FaceChildren`);
a goal also reads a work session's events (the grader's evidence), its watermark (``get_session``'s
``context_ratio``), and calls two face tools of the handoff part: ``handoff_session`` (a work session past the
watermark continues in a fresh one) and ``archive_memory`` (a work session's notes promoted at the end). Those two
are optional: a face without them answers "unknown tool", and the goal goes on without (a fresh session; no
promotion), saying so in the log.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio
from pydantic import BaseModel

from orchestrator.agents.children import (
    FINAL_RUN_STATUSES,
    WAIT_SLICE_S,
    ChildError,
    ChildHandle,
    ChildOutcome,
    ChildSpec,
    FaceChildren,
)
from orchestrator.events import Event

__all__ = ["NEEDS_REVIEW", "GoalChildren", "Handoff"]

logger = logging.getLogger(__name__)

_PAGE = 500
NEEDS_REVIEW = (
    "Loom stopped during a tool call of this run that may have had effects; a goal's session is headless, so "
    "nobody could review it, and the run was cancelled there"
)


class Handoff(BaseModel):
    """The part of ``handoff_session``'s result (``HandoffReport``) a goal reads."""

    session_id: str
    new_session_id: str


class _Archived(BaseModel):
    keys: list[str] = []


def _unknown_tool(exc: Exception) -> bool:
    return "unknown tool" in str(exc).lower()


class GoalChildren(FaceChildren):
    """:class:`~orchestrator.agents.children.FaceChildren` with what a goal needs besides.

    A spec whose ``agent`` is empty is a plain child (the goal session's own tools and model): a work session.
    """

    def __init__(
        self,
        client: Any,
        session_id: str,
        append: Callable[[Sequence[Event]], Awaitable[None]],
        *,
        refusals: tuple[type[Exception], ...] = (),
    ) -> None:
        super().__init__(client, session_id, append, headless=True, refusals=refusals)
        self.face: Any = client
        """The same client, for the tools beyond :class:`~orchestrator.agents.children.FaceClient`'s."""
        self.missing: set[str] = set()
        """The optional face tools found missing (asked once)."""

    async def create(self, spec: ChildSpec) -> str:
        """Create the child session: a work session (no agent) or the grader."""
        try:
            session = await self.face.create_session(
                "", headless=True, parent_session_id=self.session_id, agent=spec.agent or None
            )
        except self.refusals as exc:
            raise ChildError(str(exc)) from exc
        return str(session.session_id)

    async def wait(self, child: ChildHandle, timeout_s: float) -> ChildOutcome | None:
        """As :meth:`FaceChildren.wait`, except that a run left ``needs_review`` is cancelled and ends the wait.

        A goal's sessions are headless: a run resumed after a crash that stopped it in a tool call which may have had
        effects waits for a review nobody will give. Its work so far is graded instead (the grader sees why it ended).
        """
        deadline = anyio.current_time() + timeout_s if math.isfinite(timeout_s) else math.inf
        resumed = False
        while True:
            left = deadline - anyio.current_time()
            run = await self.face.get_run(child.run_id, wait_s=max(0.0, min(WAIT_SLICE_S, left)))
            if run.status in FINAL_RUN_STATUSES:
                return ChildOutcome(run.status, run.final_text, run.reason)
            if anyio.current_time() >= deadline:
                return None
            if run.status == "needs_review":
                with contextlib.suppress(*self.refusals):
                    await self.face.cancel_run(child.run_id)
                return ChildOutcome("failed", run.final_text, NEEDS_REVIEW)
            if run.status == "interrupted" and not resumed:
                resumed = True  # Loom restarted without autoResume: carry the run on under its own id, once
                with contextlib.suppress(*self.refusals):
                    await self.face.resume_run(child.run_id, headless=True)
                continue
            if run.status in ("interrupted", "awaiting_approval"):
                await anyio.sleep(min(1.0, max(0.0, left)))  # get_run answers at once for these: do not spin

    async def graders(self) -> list[str]:
        """The grader children of the goal's session, oldest first."""
        sessions = await self.face.list_sessions(include_archived=True)
        return [
            str(s.session_id)
            for s in reversed(sessions)
            if s.parent_session_id == self.session_id and s.agent == "grader"
        ]

    async def cancel_session_run(self, session_id: str) -> None:
        """Cancel a child's run if it has one still going (a refusal: it had ended)."""
        run_id = await self.find_run(session_id)
        if run_id:
            with contextlib.suppress(*self.refusals):
                await self.face.cancel_run(run_id)

    async def events(self, session_id: str) -> list[Event]:
        """Every stored event of a session, paged through ``read_events``."""
        out: list[Event] = []
        after = 0
        while True:
            page = await self.face.read_events(session_id, after_seq=after, limit=_PAGE)
            out.extend(page.events)
            if len(page.events) < _PAGE:
                return out
            after = page.next_after_seq

    async def context_ratio(self, session_id: str) -> float | None:
        """The session's watermark (context used / window), None before its first model call."""
        info = await self.face.get_session(session_id)
        ratio = getattr(info, "context_ratio", None)
        return float(ratio) if isinstance(ratio, int | float) else None

    async def handoff(self, session_id: str, instructions: str) -> str | None:
        """The fresh session continuing ``session_id`` from its handoff, or None when the face has no handoff.

        Raises:
            ChildError: The face refused the handoff (its message says why).
        """
        if "handoff_session" in self.missing:
            return None
        try:
            done: Handoff = await self.face.call(
                "handoff_session", Handoff, session_id=session_id, instructions=instructions, trigger="goal"
            )
        except self.refusals as exc:
            if _unknown_tool(exc):
                self.missing.add("handoff_session")
                logger.info("this face has no handoff_session; a goal's next session starts fresh")
                return None
            raise ChildError(str(exc)) from exc
        return done.new_session_id

    async def archive_memory(self, session_id: str) -> list[str]:
        """Promote a work session's session-namespace notes to the project's; the keys promoted (none without it)."""
        if "archive_memory" in self.missing:
            return []
        try:
            archived: _Archived = await self.face.call("archive_memory", _Archived, session_id=session_id)
        except self.refusals as exc:
            if _unknown_tool(exc):
                self.missing.add("archive_memory")
                logger.info("this face has no archive_memory; a goal's notes stay in its sessions")
            else:
                logger.warning("archive_memory %s: %s", session_id, exc)
            return []
        return archived.keys
