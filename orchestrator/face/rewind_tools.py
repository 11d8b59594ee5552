"""The face's rewind tools: list a session's checkpoints, and rewind to one of them."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

from orchestrator.protocol import CheckpointInfo, CheckpointList, FileRestoreInfo, RewindInfo
from orchestrator.runtime.host import HostError, SessionHost
from orchestrator.store.rewind import checkpoints


def add_rewind_tools(face: MCPServer, host: SessionHost) -> None:
    """Register ``list_checkpoints`` and ``rewind_session`` on ``face``."""

    @face.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True))
    async def list_checkpoints(session_id: str) -> CheckpointList:
        """The points a session can be rewound to (one before each run), with the files each run changed."""
        try:
            await host.record(session_id)
        except HostError as exc:
            raise ToolError(str(exc)) from exc
        found = await checkpoints(host.runtime.log, session_id)
        return CheckpointList(
            session_id=session_id,
            checkpoints=[
                CheckpointInfo(run_id=c.run_id, started=c.started, prompt=c.prompt, files_changed=list(c.files))
                for c in found
            ],
        )

    @face.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False))
    async def rewind_session(session_id: str, to_run_id: str) -> RewindInfo:
        """Put the files Loom's fs tools changed back as they were before run ``to_run_id``, byte for byte.

        The conversation continues from there in a new session (returned); the old one stays in the
        store. Shell commands and other servers' side effects cannot be rewound: they are listed.
        """
        try:
            done = await host.rewind(session_id, to_run_id)
        except HostError as exc:
            raise ToolError(str(exc)) from exc
        return RewindInfo(
            session_id=done.session_id,
            from_session_id=done.from_session_id,
            to_run_id=done.to_run_id,
            files=[FileRestoreInfo(path=f.path, action=f.action) for f in done.files],
            not_rewound=list(done.not_rewound),
        )
