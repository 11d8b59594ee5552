"""The durable store's interface: the only way the orchestrator persists anything.

It is deliberately narrow (append and read events, plus the run/session index derived from them).
:mod:`orchestrator.store.checkpoints` implements it as a client of Loom's checkpoints MCP server,
which owns the SQLite database; nothing in the orchestrator imports SQLite.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from pydantic import BaseModel

from orchestrator.events import Event, RunStatus, ToolCallFinished


class SessionRecord(BaseModel):
    """A session as the store indexes it."""

    id: str
    created: float
    cwd: str
    model: str
    mode: str = "bypass"
    archived: bool = False
    last_seq: int
    context_used: int | None = None
    """Tokens in use at the session's last ``context_watermark`` (None until one is stored)."""
    context_window: int | None = None
    """The context window of the session's model, from its last watermark or ``model_switched`` (None until known)."""
    title: str = ""
    """A person's name for the session, as stored (empty until one is given; clean it before showing it)."""
    last_run_status: str | None = None
    """The stored status of the session's newest run (None: it has none)."""
    last_run_owner: str = ""
    """The process recorded as driving that run (``PID:STARTTIME``)."""
    parent_session_id: str = ""
    """For a child session: the session that started it (empty for a top-level one)."""
    parent_run_id: str = ""
    """The parent's run that started it."""
    agent: str = ""
    """The agent definition the child runs as (empty: none)."""


class RunRecord(BaseModel):
    """A run as the store indexes it."""

    id: str
    session_id: str
    started: float
    finished: float | None
    status: RunStatus
    reason: str
    final_text: str
    model: str
    owner: str = ""
    """The process that drives (or drove) the run, ``PID:STARTTIME``."""


class SnapshotRecord(BaseModel):
    """A file as it was before a change, kept for rewind (content is read separately)."""

    checkpoint: str
    """The run during which the file was first changed; rewinding to before that run restores this."""
    path: str
    existed: bool
    size: int
    ts: float


class StoreError(Exception):
    """The store could not read or write; the message says what to do about it."""


class Store(Protocol):
    """Durable, append-only event log with a small index of sessions and runs."""

    async def append(self, events: Sequence[Event]) -> None:
        """Number the events (set ``seq``) and persist them atomically, in one transaction.

        Live-only events must not be passed. Session and run records are kept in step with
        ``session_created``, ``run_started`` and ``run_finished`` events (and the others that change
        them); a session's model and context fields follow ``context_watermark`` and ``model_switched``.

        Raises:
            StoreError: nothing of this batch was stored.
        """
        ...

    async def read_events(
        self,
        session_id: str,
        *,
        after_seq: int = 0,
        run_id: str | None = None,
        limit: int | None = None,
        before_seq: int | None = None,
    ) -> list[Event]:
        """Events of a session with ``seq > after_seq`` in order, optionally only one run's.

        With ``before_seq``, only those with ``seq < before_seq``, and ``limit`` keeps the newest of them, still
        in order: reading backwards from the end, page by page, costs each page's size.
        """
        ...

    async def read_context_events(self, session_id: str) -> list[Event]:
        """The events the model's context is rebuilt from, in ``seq`` order.

        That is the latest ``context_compacted`` and every event from its ``kept_from_seq`` on, or all of
        the session's events if it was never compacted.
        """
        ...

    async def find_tool_result(self, session_id: str, call_id: str) -> ToolCallFinished | None:
        """The session's latest ``tool_call_finished`` event for ``call_id``, or None.

        The latest, because a resumed run may finish the same call again. The store finds it without
        reading the session's other events.
        """
        ...

    async def get_session(self, session_id: str) -> SessionRecord | None:
        """One session, or None."""
        ...

    async def list_sessions(self, *, include_archived: bool = False, limit: int = 100) -> list[SessionRecord]:
        """Sessions, newest first."""
        ...

    async def set_session_title(self, session_id: str, title: str) -> bool:
        """Give a session a title (stored as given: the caller cleans it); False when there is no such session.

        Raises:
            StoreError: it could not be stored.
        """
        ...

    async def get_run(self, run_id: str) -> RunRecord | None:
        """One run, or None."""
        ...

    async def list_runs_with_status(self, status: str) -> list[RunRecord]:
        """Every run currently in ``status``, oldest first."""
        ...

    async def list_runs(self, session_id: str | None = None, limit: int = 50) -> list[RunRecord]:
        """The most recent runs first."""
        ...

    async def snapshot_file(self, session_id: str, checkpoint: str, path: str, content: bytes | None) -> bool:
        """Keep ``path``'s content (None: it does not exist) under ``checkpoint``; the first one per path wins.

        Returns:
            Whether this call recorded it (False: the checkpoint already had the file).
        """
        ...

    async def list_snapshots(self, session_id: str) -> list[SnapshotRecord]:
        """A session's file snapshots, oldest first, without their content."""
        ...

    async def read_snapshot(self, session_id: str, checkpoint: str, path: str) -> tuple[bool, bytes | None] | None:
        """``(existed, content)`` of one snapshot, or None if there is none."""
        ...
