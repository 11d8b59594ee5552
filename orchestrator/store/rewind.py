"""Rewind: put a session's files back as they were before one of its runs, and branch the conversation.

Before Loom's fs server changes a file (write, edit, delete), the runtime snapshots the file's prior
content into the store under the current run (the run is the checkpoint; the first snapshot of a path
per run wins). Rewinding to before run R restores, for every path changed in R or later, the snapshot
taken under the earliest such run: that is the file as it was when R started. Files created since are
deleted, files deleted since come back, byte for byte.

The conversation continues on a new session (a branch) that starts with the original's conversation
up to R; the original session, the abandoned branch, stays in the store untouched apart from a notice.
What the shell or another server did cannot be rewound: the result lists those calls so the user knows.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import anyio

from orchestrator.events import (
    AssistantMessage,
    Event,
    Notice,
    RunResumed,
    RunStarted,
    SessionCreated,
    ToolCallFinished,
    ToolCallStarted,
    UserMessage,
)
from orchestrator.events_long import TodoUpdated
from orchestrator.store.eventlog import EventLog
from orchestrator.store.interface import SessionRecord

_FILE_TOOLS = frozenset({"fs__write", "fs__edit", "fs__delete"})
"""Calls whose effects the snapshots cover."""

_READ_ONLY_FS = frozenset({"fs__read", "fs__list", "fs__glob", "fs__grep"})

_BRANCH_EVENTS = (UserMessage, AssistantMessage, ToolCallFinished, RunResumed, TodoUpdated)
"""What a branch copies: exactly what :func:`orchestrator.context.history.rebuild_history` reads, and the model's
plan as it stood (``todo_updated``)."""


class RewindError(Exception):
    """A rewind cannot be done (unknown checkpoint, a run in progress); the message says what to do."""


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A point a session can be rewound to: just before one of its runs."""

    run_id: str
    started: float
    prompt: str
    """The user message the run answered (empty for a resumed run's continuation)."""
    files: tuple[str, ...]
    """Files Loom's fs tools changed during the run."""


@dataclass(frozen=True, slots=True)
class FileRestore:
    """What rewinding did to one file."""

    path: str
    action: Literal["restored", "deleted", "recreated"]
    """``restored``: content put back; ``deleted``: created since, removed; ``recreated``: deleted since."""


@dataclass(frozen=True, slots=True)
class RewindResult:
    """What a rewind did."""

    session_id: str
    """The new branch, which continues the conversation from the checkpoint."""
    from_session_id: str
    to_run_id: str
    files: tuple[FileRestore, ...]
    not_rewound: tuple[str, ...]
    """Calls since the checkpoint whose effects Loom cannot undo (shell commands, other servers)."""


async def checkpoints(log: EventLog, session_id: str) -> list[Checkpoint]:
    """The session's checkpoints, oldest first (one per run)."""
    events = await log.store.read_events(session_id)
    changed: dict[str, list[str]] = {}
    for snap in await log.store.list_snapshots(session_id):
        changed.setdefault(snap.checkpoint, []).append(snap.path)
    prompts = {e.run_id: e.text for e in events if isinstance(e, UserMessage)}
    return [
        Checkpoint(e.run_id, e.ts, prompts.get(e.run_id, ""), tuple(changed.get(e.run_id, ())))
        for e in events
        if isinstance(e, RunStarted)
    ]


async def rewind(log: EventLog, record: SessionRecord, to_run_id: str) -> RewindResult:
    """Restore the files of ``record``'s session as they were before ``to_run_id`` and branch the conversation.

    The caller makes sure no run of the session is in progress.

    Raises:
        RewindError: ``to_run_id`` is not a run of this session, or a snapshot points outside the workspace.
        orchestrator.store.interface.StoreError: the store could not be read or written.
        OSError: a file could not be restored (the message names it; files before it are restored).
    """
    store = log.store
    events = await store.read_events(record.id)
    order = [e.run_id for e in events if isinstance(e, RunStarted)]
    if to_run_id not in order:
        known = ", ".join(order[-5:]) or "none yet"
        raise RewindError(f"{to_run_id!r} is not a run of session {record.id} (its latest runs: {known})")
    later = set(order[order.index(to_run_id) :])
    first_snapshot: dict[str, str] = {}  # path -> the earliest checkpoint at or after the target that has it
    for snap in await store.list_snapshots(record.id):
        if snap.checkpoint in later:
            current = first_snapshot.get(snap.path)
            if current is None or order.index(snap.checkpoint) < order.index(current):
                first_snapshot[snap.path] = snap.checkpoint
    workspace = Path(await anyio.Path(record.cwd).resolve())
    restored: list[FileRestore] = []
    for path, checkpoint in sorted(first_snapshot.items()):
        found = await store.read_snapshot(record.id, checkpoint, path)
        done = None if found is None else await _restore(workspace, Path(path), *found)
        if done is not None:
            restored.append(done)

    cut = next(i for i, e in enumerate(events) if isinstance(e, RunStarted) and e.run_id == to_run_id)
    branch_id = f"s_{uuid.uuid4().hex[:12]}"
    not_rewound = _not_rewound(events[cut:])
    what = f"{len(restored)} file(s) restored" + (
        f"; not rewound (Loom cannot undo them): {'; '.join(not_rewound)}" if not_rewound else ""
    )
    # The branch's copies keep the original run ids: the branch's history says where it came from.
    copies = [
        e.model_copy(update={"seq": None, "session_id": branch_id})
        for e in events[:cut]
        if isinstance(e, _BRANCH_EVENTS)
    ]
    await log.append(
        SessionCreated(session_id=branch_id, cwd=record.cwd, model=record.model, mode=record.mode),
        *copies,
        Notice(session_id=branch_id, text=f"branched from session {record.id}, rewound to before run {to_run_id}"),
    )
    await log.append(
        Notice(
            session_id=record.id,
            level="warning",
            text=f"rewound to before run {to_run_id}: {what}; the conversation continues in session {branch_id}",
        )
    )
    return RewindResult(branch_id, record.id, to_run_id, tuple(restored), tuple(not_rewound))


async def _restore(workspace: Path, path: Path, existed: bool, content: bytes | None) -> FileRestore | None:
    if not path.is_relative_to(workspace):
        raise RewindError(f"a snapshot of {path} lies outside the session's workspace {workspace}; nothing there")
    target = anyio.Path(path)
    exists = await target.exists()
    shown = str(path.relative_to(workspace))
    if not existed:
        if not exists:
            return None  # created since, and already gone again
        await target.unlink()
        return FileRestore(shown, "deleted")
    await target.parent.mkdir(parents=True, exist_ok=True)
    await target.write_bytes(content or b"")
    return FileRestore(shown, "restored" if exists else "recreated")


def _not_rewound(events: list[Event]) -> list[str]:
    calls: list[str] = []
    for e in events:
        if isinstance(e, ToolCallStarted) and e.tool not in _FILE_TOOLS | _READ_ONLY_FS:
            command = e.arguments.get("command")
            calls.append(f"{e.tool} {command!r}" if isinstance(command, str) else e.tool)
    return calls
