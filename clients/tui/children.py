"""The conversation's records of its children: a block per child run, and which approvals are whose.

Kept apart from :mod:`clients.tui.conversation` so that the conversation's rendering of older history (from a
fresh state, then merged in) swaps one object, and so that a child's lifecycle reads in one place. Only records and
:class:`~clients.tui.entry.Entry` changes: the conversation decides where blocks go and what happens to cards.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from clients.tui.child_block import ChildBlock
from clients.tui.entry import Entry
from orchestrator.events import ChildActivity, ChildFinished, ChildStarted

__all__ = ["ChildEvent", "Children"]

ChildEvent = ChildStarted | ChildActivity | ChildFinished


class Children:
    """Child blocks by the child's run, the latest run of each child, and the approvals that are a child's."""

    def __init__(self) -> None:
        self._blocks: dict[str, Entry[ChildBlock]] = {}
        """child_run_id -> the block of that run of the child (one per spawn or follow-up)."""
        self._latest: dict[str, str] = {}
        """child_session_id -> its latest run's id (approvals name the child session, not its run)."""
        self._parent_run: dict[str, str] = {}
        """child_run_id -> the parent's run it works for."""
        self._agents: dict[str, str] = {}
        """child_session_id -> the agent it runs as (its approvals' cards name it)."""
        self.cards: dict[str, str] = {}
        """approval_id -> the child session whose call waits."""

    def block(self, child_session_id: str) -> Entry[ChildBlock] | None:
        """The record of the child's latest run's block."""
        return self._blocks.get(self._latest.get(child_session_id, ""))

    def agent(self, child_session_id: str) -> str:
        """The agent the child runs as (empty: none, or not seen)."""
        return self._agents.get(child_session_id, "")

    def show(self, event: ChildEvent, add: Callable[[Entry[ChildBlock]], None]) -> None:
        """Change the child run's block (``add`` puts a new one in the conversation)."""
        entry = self._blocks.get(event.child_run_id)
        if entry is None:  # started before what this view read (opened mid-run): the block starts here
            child, run = event.child_session_id, event.child_run_id
            depth = event.depth if isinstance(event, ChildStarted) else 2
            entry = self._blocks[run] = Entry(lambda: ChildBlock(child_session_id=child, child_run_id=run, depth=depth))
            add(entry)
        self._latest[event.child_session_id] = event.child_run_id
        self._parent_run[event.child_run_id] = event.run_id
        e = event
        if isinstance(e, ChildStarted):
            self._agents[e.child_session_id] = e.agent
            entry.change(lambda w: w.started(agent=e.agent, goal=e.goal, depth=e.depth, at=e.ts))
        elif isinstance(e, ChildActivity):
            entry.change(lambda w: w.activity(e.step, e.tool, e.ts))
        else:
            entry.change(
                lambda w: w.finished(
                    status=e.status, reason=e.reason, steps=e.steps, elapsed_s=e.elapsed_s, answer=e.final_text
                )
            )

    def waits(self, child_session_id: str, pending: Iterable[str]) -> None:
        """Show on the child's block whether any of its calls still waits (``pending``: undecided approvals)."""
        entry = self.block(child_session_id)
        if entry is not None:
            waiting = any(self.cards.get(a) == child_session_id for a in pending)
            entry.change(lambda w: w.waiting(waiting))

    def parent_ended(self, run_id: str, status: str, at: float) -> None:
        """The parent's run ended (not completed): blocks of its children still shown running stop there."""
        for run in [r for r, parent in self._parent_run.items() if parent == run_id]:
            self._blocks[run].change(lambda w: w.parent_ended(status, at))

    def put_older(self, older: Children) -> None:
        """Take in the records of older history (rendered apart), keeping this one's where both know a child."""
        self._blocks = {**older._blocks, **self._blocks}
        self._latest = {**older._latest, **self._latest}  # a newer run of a child is its latest
        self._parent_run = {**older._parent_run, **self._parent_run}
        self._agents = {**older._agents, **self._agents}
        self.cards = {**older.cards, **self.cards}
