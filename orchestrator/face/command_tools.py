"""The face's tools behind a client's commands: change a session's mode, list its skills.

``set_mode`` is a person's control over policy, so it belongs to the face's clients alone: a session's model
reaches tools through the hub, never the face, and cannot read the daemon's token (``$LOOM_HOME`` is hidden
from every tool). Should a user wire the face back in as one of a session's servers, the tool's annotations
(not read-only, destructive) make policy ask a person about each call in ``ask`` and ``accept-edits``, and deny
it in ``plan``; only ``bypass``, which already allows everything, lets it through.
"""

from __future__ import annotations

from pathlib import Path

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

from orchestrator.context.instructions import project_root
from orchestrator.context.skills import find_skills
from orchestrator.events import ModeChanged
from orchestrator.face.caller import client_of
from orchestrator.policy import MODES
from orchestrator.policy.narrowing import NarrowingError
from orchestrator.protocol_commands import ModeInfo, SkillInfo, SkillList
from orchestrator.runtime.host import HostError, SessionHost

__all__ = ["add_command_tools"]

_READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
_CHANGES_POLICY = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)


def add_command_tools(face: MCPServer, host: SessionHost) -> None:
    """Register ``set_mode`` and ``list_skills`` on ``face`` (``list_models`` is in :mod:`.server_tools`)."""

    @face.tool(annotations=_CHANGES_POLICY)
    async def set_mode(session_id: str, mode: str, ctx: Context, changed_by: str = "") -> ModeInfo:
        """Change a session's policy mode; the next tool call is decided under it, even in a run that is going.

        mode: 'ask', 'accept-edits', 'plan' or 'bypass' (as for create_session). A call already waiting for
        approval still waits. The change is recorded as a mode_changed event and kept when the session is
        reopened. For a person's client (the TUI's /mode): a session's own model cannot reach this tool.
        """
        if mode not in MODES:
            raise ToolError(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
        try:
            session = await host.session(session_id)
        except HostError as exc:
            raise ToolError(str(exc)) from exc
        previous = session.approvals.mode
        if previous == mode:
            return ModeInfo(session_id=session_id, mode=mode, previous=previous, changed=False)
        who = changed_by[:200] or client_of(ctx)
        try:
            bounds = session.approvals.bounds.with_mode(mode)  # a child may not be freer than its parent
        except NarrowingError as exc:
            raise ToolError(str(exc)) from exc
        # Stored first: a reopened session (and every client) must see the mode the next call is decided under.
        await host.runtime.log.append(ModeChanged(session_id=session_id, mode=mode, previous=previous, changed_by=who))
        session.approvals.bounds = bounds
        host.rebase_children(session)
        return ModeInfo(session_id=session_id, mode=mode, previous=previous, changed=True)

    @face.tool(annotations=_READ_ONLY)
    async def list_skills(session_id: str) -> SkillList:
        """The skills a session's model can load, by name (the user's, and its project's, which win on a clash)."""
        try:
            record = await host.record(session_id)
        except HostError as exc:
            raise ToolError(str(exc)) from exc
        home = host.runtime.home

        def scan() -> tuple[list[SkillInfo], list[str]]:
            found, problems = find_skills(home, project_root(Path(record.cwd)))
            return [SkillInfo(name=s.name, description=s.description, source=s.source) for s in found], problems

        skills, problems = await anyio.to_thread.run_sync(scan)
        return SkillList(session_id=session_id, skills=skills, problems=problems)
