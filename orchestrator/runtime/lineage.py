"""Where a session sits in the tree of sessions: a child's parent, its ancestors and the role it was started as.

A child session is started by a parent's subagents tool (or a client's ``create_session`` with a parent) for one
task. Its context is its own: its brief as the first user message, the instruction files and skills of its
directory, and its agent definition's prompt as its role; never its parent's history. Its policy is narrowed from
its parent's (:mod:`orchestrator.policy.narrowing`), which is held in the session's bounds, not here.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CHILD_NOTE", "Lineage"]

CHILD_NOTE = (
    "You were started by another agent session to do the task in the user's message, with your own context: you "
    "have not seen its conversation. Work on that task only. Your final answer is returned to that agent as your "
    "result, so end with a complete answer: what you found or did, the files you changed, and any open questions."
)
"""What a child's system prompt adds, so that its model knows who reads its answer."""


@dataclass(frozen=True, slots=True)
class Lineage:
    """A session's place in the tree.

    Attributes:
        parent_session_id: The session that started this one; empty for a top-level session.
        parent_run_id: The parent's run that started it (empty when none was going).
        ancestors: Every session above this one, the parent first and the top-level session last.
        agent: The agent definition it runs as (empty: none).
        role: That definition's prompt (its body), added to the system prompt.
    """

    parent_session_id: str = ""
    parent_run_id: str = ""
    ancestors: tuple[str, ...] = ()
    agent: str = ""
    role: str = ""

    @property
    def is_child(self) -> bool:
        """Whether the session has a parent."""
        return bool(self.parent_session_id)

    @property
    def depth(self) -> int:
        """The session's level: 1 for a top-level session, 2 for its children, and so on."""
        return len(self.ancestors) + 1

    def child(self, session_id: str, *, parent_run_id: str, agent: str, role: str) -> Lineage:
        """The place of a child of the session ``session_id``, whose lineage this is."""
        return Lineage(session_id, parent_run_id, (session_id, *self.ancestors), agent, role)

    def role_prompt(self) -> str:
        """What the system prompt gains: nothing for a top-level session; the child note and the agent's role."""
        if not self.is_child:
            return ""
        text = f"\n\n# You are a child session\n\n{CHILD_NOTE}"
        if self.role.strip():
            text += f"\n\n# Your role: {self.agent or 'agent'}\n\n{self.role.strip()}"
        return text
