"""The face's handoff tools: hand a session off to a fresh one, read a handoff back, promote a session's notes.

``handoff_session`` answers once the fresh session exists (the model writes the handoff first, so it takes a model
call or two; it refuses a busy session rather than wait). The work is :mod:`orchestrator.runtime.handoff`'s.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from orchestrator.events_long import HandoffTrigger
from orchestrator.protocol_long import HandoffReport, MemoryArchiveInfo
from orchestrator.runtime.host import HostError, SessionHost
from orchestrator.store.interface import StoreError

__all__ = ["add_handoff_tools"]

MAX_INSTRUCTIONS_CHARS = 16_000
"""The person's extra text for the fresh session, at most (it is quoted in full in the fresh session's context)."""

_READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)


@contextlib.contextmanager
def _refusals() -> Iterator[None]:
    """The host's refusals and the store's failures as error results, in the caller's terms."""
    try:
        yield
    except HostError as exc:
        raise ToolError(str(exc)) from exc
    except StoreError as exc:
        raise ToolError(f"Loom's database refused the write, nothing was handed off: {exc}") from exc


def add_handoff_tools(face: MCPServer, host: SessionHost) -> None:
    """Register ``handoff_session``, ``get_handoff`` and ``archive_memory`` on ``face`` over ``host``."""

    @face.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False))
    async def handoff_session(
        session_id: str,
        instructions: str = Field("", max_length=MAX_INSTRUCTIONS_CHARS),
        keep_memory: bool = False,
        trigger: HandoffTrigger = "manual",
    ) -> HandoffReport:
        """End an idle session by handing it off to a fresh one, which continues the work from a written handoff.

        The session's model writes the handoff in fixed blocks (goal and constraints, decisions, state of files and
        systems, work done with evidence, open items, next step, warnings), checked like a compaction summary: every
        block there, every user instruction verbatim; retried once, else an error and nothing changes. Then a fresh
        session with the same directory, mode, model, advisor and rules starts from it (its first request carries
        the handoff and the instructions, and ``instructions``, extra text for it, verbatim), and the old session
        is archived (kept in the store, readable). The session's notes are promoted to the project namespace unless
        ``keep_memory``. ``trigger``: ``goal`` when a goal's controller hands off a work session past its watermark.
        Refused while a run of the session is going.
        """
        with _refusals():
            return await host.handoffs.handoff(session_id, instructions, trigger=trigger, keep_memory=keep_memory)

    @face.tool(annotations=_READ_ONLY)
    async def get_handoff(session_id: str) -> HandoffReport:
        """The handoff a session wrote (the old session's id) or started from (the fresh session's id)."""
        with _refusals():
            return await host.handoffs.get(session_id)

    @face.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True))
    async def archive_memory(session_id: str) -> MemoryArchiveInfo:
        """Promote the notes a session saved in its session memory namespace to its project's namespace.

        Copies (the session keeps its own); a project note is never overwritten: a different note of the same key
        stays, and the session's goes beside it under ``<key>.<session>``. Running it again promotes nothing twice.
        Works on archived sessions.
        """
        with _refusals():
            return await host.handoffs.archive_memory(session_id)
