"""The orchestrator's MCP face: tools another agent (or Loom's own clients) use to drive sessions.

A first slice of the driving API: create a session, send it a message (returns at once, or waits up
to ``wait_s``), read its events from a cursor with long-polling, get and cancel runs. Every call is
bounded; handles are plain ids. Results are structured and read well on their own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from orchestrator.host import HostError, RunHandle, SessionHost
from orchestrator.models import ModelSpecError, default_model_spec, resolve_model

MAX_WAIT_S = 60.0
"""No call blocks longer than this; poll again to keep waiting."""


class SessionInfo(BaseModel):
    """A session handle."""

    session_id: str
    cwd: str
    model: str


class RunInfo(BaseModel):
    """Where a run is; ``final_text`` is the answer once ``status`` is final."""

    run_id: str
    session_id: str
    status: str
    reason: str = ""
    final_text: str = ""


class EventPage(BaseModel):
    """Stored events after a cursor; pass ``next_after_seq`` back to continue without gap or duplicate."""

    session_id: str
    events: list[dict[str, Any]]
    next_after_seq: int


def _info(handle: RunHandle) -> RunInfo:
    result = handle.result
    return RunInfo(
        run_id=handle.run_id,
        session_id=handle.session_id,
        status=handle.status,
        reason=result.reason if result else "",
        final_text=result.final_text if result else "",
    )


def build_face(host: SessionHost) -> MCPServer:
    """An MCP server over ``host``."""
    face = MCPServer(
        "loom", instructions="Drive Loom agent sessions: create, send, follow, cancel.", log_level="WARNING"
    )
    read_only = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)

    @face.tool()
    async def create_session(cwd: str, model: str | None = None) -> SessionInfo:
        """Create an agent session working in directory ``cwd`` (model as PROVIDER:NAME; default as configured)."""
        try:
            chosen = resolve_model(model or default_model_spec(), base_dir=Path(cwd))
            session = await host.create_session(Path(cwd), chosen)
        except (HostError, ModelSpecError) as exc:
            raise ToolError(str(exc)) from exc
        return SessionInfo(session_id=session.id, cwd=str(session.cwd), model=session.model.name)

    @face.tool()
    async def send_message(
        session_id: str,
        text: str,
        wait_s: float = Field(0.0, ge=0, le=MAX_WAIT_S),
        max_steps: int = Field(50, ge=1, le=1000),
    ) -> RunInfo:
        """Start a run answering ``text``; returns at once, or after up to ``wait_s`` seconds if it finishes."""
        try:
            handle = host.start_run(session_id, text, max_steps)
        except HostError as exc:
            raise ToolError(str(exc)) from exc
        await host.wait(handle, wait_s)
        return _info(handle)

    @face.tool(annotations=read_only)
    async def get_run(run_id: str, wait_s: float = Field(0.0, ge=0, le=MAX_WAIT_S)) -> RunInfo:
        """A run's status and, once finished, its final answer; ``wait_s`` long-polls for the end."""
        try:
            handle = host.run(run_id)
        except HostError as exc:
            raise ToolError(str(exc)) from exc
        await host.wait(handle, wait_s)
        return _info(handle)

    @face.tool()
    async def cancel_run(run_id: str) -> RunInfo:
        """Cancel a run; it is recorded as cancelled."""
        try:
            handle = host.run(run_id)
        except HostError as exc:
            raise ToolError(str(exc)) from exc
        handle.scope.cancel()
        await host.wait(handle, 10.0)
        return _info(handle)

    @face.tool(annotations=read_only)
    async def read_events(
        session_id: str,
        after_seq: int = Field(0, ge=0),
        wait_s: float = Field(0.0, ge=0, le=MAX_WAIT_S),
        limit: int = Field(200, ge=1, le=1000),
    ) -> EventPage:
        """Stored events of a session with seq > ``after_seq``; waits up to ``wait_s`` when none are new yet."""
        try:
            host.session(session_id)
        except HostError as exc:
            raise ToolError(str(exc)) from exc
        log = host.runtime.log
        events = await log.store.read_events(session_id, after_seq=after_seq, limit=limit)
        deadline = anyio.current_time() + wait_s
        while not events and anyio.current_time() < deadline:  # other sessions' writes wake us too
            await log.wait_stored(deadline - anyio.current_time())
            events = await log.store.read_events(session_id, after_seq=after_seq, limit=limit)
        last = events[-1].seq if events and events[-1].seq is not None else after_seq
        return EventPage(session_id=session_id, events=[e.model_dump(mode="json") for e in events], next_after_seq=last)

    return face
