"""The sessions as a tree: each child session under the session that started it, in the order it was started.

A pure function of ``list_sessions``' answer (each session names its parent) and of which branches the user
opened or closed, so the panel can redraw it at every poll. A branch whose sessions need a person, or that holds
the session shown, or whose children are still running, is open unless the user closed it; one with a child that
waits for a person is open whatever the user did, so that nothing that needs you is hidden.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from orchestrator.protocol import SessionInfo
from orchestrator.store.session_view import NEEDS_YOU

__all__ = ["TreeRow", "session_tree"]


@dataclass(frozen=True)
class TreeRow:
    """One visible session of the tree."""

    session: SessionInfo
    depth: int
    """0 for a top-level session, 1 for its children, and so on."""
    guide: str
    """What draws the branch before the name (``├ `` / ``└ `` under the parent, indented by depth)."""
    descendants: int
    """How many sessions are under this one (shown or not)."""
    expanded: bool
    """Its children are shown (meaningless without children)."""
    urgent: bool
    """It, or a session under it, waits for a person."""
    pinned: bool = False
    """Open whatever the user chose: a session under it waits for a person."""


def session_tree(
    sessions: Sequence[SessionInfo],
    *,
    cwd: str,
    waiting: set[str] | frozenset[str] = frozenset(),
    opened: Mapping[str, bool] | None = None,
    current: str | None = None,
) -> list[TreeRow]:
    """The visible rows: top-level sessions that need a person first, then those of ``cwd``, then the rest.

    Args:
        sessions: as ``list_sessions`` gave them (newest first). A session whose parent is not among them (archived,
            or past the list's end) is shown at the top level.
        cwd: whose sessions come right after those that need a person.
        waiting: ids of sessions with a pending approval (besides what their status says).
        opened: the user's choice per session with children (True: open, False: closed); others follow the defaults.
        current: the session shown in the conversation (its branch opens).
    """
    opened = opened or {}
    ids = {s.session_id for s in sessions}
    children: dict[str, list[SessionInfo]] = {}
    roots: list[SessionInfo] = []
    for s in sessions:
        parent = s.parent_session_id
        if parent and parent in ids and parent != s.session_id:
            children.setdefault(parent, []).append(s)
        else:
            roots.append(s)
    for kids in children.values():
        kids.reverse()  # the list is newest first; children read best in the order they were started

    memo: dict[str, tuple[int, bool, bool, bool]] = {}

    def facts(s: SessionInfo, seen: frozenset[str]) -> tuple[int, bool, bool, bool]:
        """(descendants, needs you in the subtree, current in it, a descendant running), cycles cut."""
        if s.session_id in memo:
            return memo[s.session_id]
        count, urgent, here, busy = 0, _needs_you(s, waiting), s.session_id == current, False
        for kid in children.get(s.session_id, []):
            if kid.session_id in seen:
                continue
            n, u, h, b = facts(kid, seen | {kid.session_id})
            count, urgent, here = count + 1 + n, urgent or u, here or h
            busy = busy or b or kid.status == "running" or kid.state == "active"
        memo[s.session_id] = (count, urgent, here, busy)
        return memo[s.session_id]

    def pinned(s: SessionInfo, seen: frozenset[str]) -> bool:
        """A session under it waits for a person (it is never hidden)."""
        return any(
            facts(k, seen | {k.session_id})[1] for k in children.get(s.session_id, []) if k.session_id not in seen
        )

    rows: list[TreeRow] = []

    def walk(s: SessionInfo, depth: int, guide: str, seen: frozenset[str]) -> None:
        count, urgent, here, busy = facts(s, seen)
        pin = pinned(s, seen)
        expanded = bool(count) and (pin or opened.get(s.session_id, here or busy or urgent))
        rows.append(TreeRow(s, depth, guide, count, expanded, urgent, pin))
        if not expanded:
            return
        kids = [k for k in children.get(s.session_id, []) if k.session_id not in seen]
        for i, kid in enumerate(kids):
            branch = "└ " if i == len(kids) - 1 else "├ "
            walk(kid, depth + 1, "  " * depth + branch, seen | {kid.session_id})

    ordered = sorted(
        roots, key=lambda r: (not facts(r, frozenset({r.session_id}))[1], r.cwd != cwd)
    )  # stable: newest first within each group
    for root in ordered:
        walk(root, 0, "", frozenset({root.session_id}))
    return rows


def _needs_you(session: SessionInfo, waiting: set[str] | frozenset[str]) -> bool:
    return session.status in NEEDS_YOU or session.session_id in waiting
