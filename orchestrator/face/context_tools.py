"""The face's context tools: compact a session (or preview it), and switch its model.

Both refuse while a run of the session is in progress rather than wait for it: a face call must
return in bounded time, and a run can wait on an approval for hours. Cancel the run, or call again
when it has ended.
"""

from __future__ import annotations

from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

from orchestrator.context.compactor import CompactionReport, SwitchError
from orchestrator.events import ContextCompacted
from orchestrator.models import ModelSpecError, resolve_model
from orchestrator.protocol import CompactionInfo, ModelSwitchInfo
from orchestrator.runtime.host import HostError, SessionHost
from orchestrator.runtime.runtime import Session
from orchestrator.store.interface import StoreError


def compaction_info(session: Session, report: CompactionReport) -> CompactionInfo:
    """A face result from a compaction report."""
    info = CompactionInfo(
        session_id=session.id,
        status=report.status,
        tokens_before=report.tokens_before,
        tokens_after=report.tokens_after,
        window=session.meter.profile.context_window,
        detail=report.detail,
    )
    if isinstance(report.event, ContextCompacted):
        info.dropped_messages = report.event.dropped_messages
        info.dropped_tool_calls = report.event.dropped_tool_calls
        info.summary = report.event.summary
    elif report.preview is not None:
        info.dropped_messages = report.preview.dropped_messages
        info.dropped_tool_calls = report.preview.dropped_tool_calls
    return info


def add_context_tools(face: MCPServer, host: SessionHost) -> None:
    """Register ``compact_session`` and ``switch_model`` on ``face``."""

    async def idle_session(session_id: str) -> Session:
        session = await host.session(session_id)
        host.check_idle(session.id)
        return session

    @face.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False))
    async def compact_session(session_id: str, focus: str = "", preview: bool = False) -> CompactionInfo:
        """Replace the older history in the model's context with a checked summary (the store keeps it all).

        focus: what the summary should give most room to. preview: only estimate the token counts before and
        after, without calling the model or changing anything. Refused while a run of the session is going.
        """
        try:
            session = await idle_session(session_id)
            report = await session.compact(focus=focus, preview=preview)
        except (HostError, StoreError) as exc:
            raise ToolError(str(exc)) from exc
        return compaction_info(session, report)

    @face.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True))
    async def switch_model(session_id: str, model: str) -> ModelSwitchInfo:
        """Use another model (PROVIDER:NAME) for the session's next runs.

        If the history would pass the new model's compaction threshold it is compacted first, by the current
        model; if it still does not fit the new window the switch is refused. Refused while a run is going.
        """
        try:
            session = await idle_session(session_id)
            chosen = resolve_model(model, base_dir=Path(session.cwd))
            previous = session.model.name
            report = await session.switch_model(chosen)
        except (HostError, StoreError, ModelSpecError, SwitchError) as exc:
            raise ToolError(str(exc)) from exc
        return ModelSwitchInfo(
            session_id=session.id,
            model=chosen.name,
            previous=previous,
            window=session.meter.profile.context_window,
            compaction=compaction_info(session, report) if report is not None else None,
        )
