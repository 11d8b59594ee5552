"""The orchestrator's MCP face: the tools other agents (and Loom's own clients) drive sessions with.

Every call is bounded (``wait_s`` at most :data:`MAX_WAIT_S`); handles are plain ids that survive
reconnects and restarts; results are structured and read well on their own, because Claude Code and
Codex show their model the structured content rather than the text.
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any

import anyio
from mcp.server.elicitation import AcceptedElicitation, ElicitationResult
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.resolve import Elicit, Resolve
from mcp.types import ToolAnnotations
from pydantic import Field

from orchestrator.config import ADVISOR_MODES
from orchestrator.events import Event
from orchestrator.face.caller import client_of
from orchestrator.face.command_tools import add_command_tools
from orchestrator.face.context_tools import add_context_tools
from orchestrator.face.features import FaceServer
from orchestrator.face.goal_tools import add_goal_tools
from orchestrator.face.handoff_tools import add_handoff_tools
from orchestrator.face.input import check_directory
from orchestrator.face.live import read_back, read_page, stream_pages
from orchestrator.face.models import child_model, top_level_model
from orchestrator.face.orchestrate_tools import add_orchestrate_tools
from orchestrator.face.question_tools import add_question_tools
from orchestrator.face.review_tools import add_review_tools
from orchestrator.face.rewind_tools import add_rewind_tools
from orchestrator.face.server_tools import add_server_tools
from orchestrator.face.tasks import RunTasks
from orchestrator.loop.approvals import PendingApproval
from orchestrator.models import ModelSpecError
from orchestrator.protocol import (
    MAX_RUN_S,
    MAX_SEQ,
    MAX_WAIT_S,
    ApprovalAnswer,
    ApprovalInfo,
    ApprovalList,
    EventPage,
    RunInfo,
    SessionInfo,
    SessionList,
)
from orchestrator.runtime.host import HostError, RunView, SessionHost
from orchestrator.runtime.owner import owner_alive
from orchestrator.store.eventlog import TAIL_EVENTS
from orchestrator.store.interface import SessionRecord
from orchestrator.store.session_view import MAX_TITLE_CHARS, clean_title, session_status
from servers._version import loom_version

_READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)


_LIVE_WHEN = frozenset({"running", "queued", "awaiting_approval", "needs_review"})
"""Stored run statuses for which the status depends on whether the run's process is still alive."""


def _session(record: SessionRecord, state: str, waiting: Sequence[PendingApproval] = ()) -> SessionInfo:
    going = state == "active"
    # Only a stored status that says "going" asks whether the process behind it lives (a look at /proc).
    live = going or (record.last_run_status in _LIVE_WHEN and owner_alive(record.last_run_owner))
    status = session_status(
        archived=record.archived,
        running=going,
        waiting=[p.kind for p in waiting],
        last_run_status=record.last_run_status,
        last_run_live=live,
    )
    return SessionInfo(
        session_id=record.id,
        cwd=record.cwd,
        model=record.model,
        mode=record.mode,
        archived=record.archived,
        last_seq=record.last_seq,
        state=state,
        status=status,
        title=clean_title(record.title),
        context_used=record.context_used,
        context_window=record.context_window,
        context_ratio=(
            round(record.context_used / record.context_window, 4)
            if record.context_used is not None and record.context_window
            else None
        ),
        parent_session_id=record.parent_session_id,
        parent_run_id=record.parent_run_id,
        agent=record.agent,
    )


def _approval(p: PendingApproval, asked: str | None = None) -> ApprovalInfo:
    # Asked about a session, a descendant's approval is shown as that session's, tagged with the child's id.
    child = p.session_id if asked is not None and asked != p.session_id else ""
    return ApprovalInfo(
        approval_id=p.approval_id,
        session_id=asked if child else p.session_id,
        child_session_id=child,
        run_id=p.run_id,
        tool=p.tool,
        arguments=p.arguments,
        reason=p.reason,
        kind=p.kind,
        decision=p.decision,
        decided_by=p.decided_by,
    )


def build_face(host: SessionHost) -> MCPServer:
    """An MCP server over ``host``."""
    face = FaceServer(
        host,
        "loom",
        version=loom_version(),
        instructions=(
            "Drive Loom agent sessions. create_session, then send_message (returns at once; poll get_run "
            "or read_events with wait_s). Runs in mode 'ask' wait for approvals: list_approvals, decide_approval. "
            "An interrupted run continues with resume_run. get_session shows how full the model's context is "
            "(context_ratio); sessions compact themselves past 0.8 of it, and compact_session / switch_model "
            "manage it on request."
        ),
        log_level="WARNING",
        extensions=[RunTasks(host)],
    )

    def session_info(record: SessionRecord) -> SessionInfo:
        return _session(record, host.session_state(record), host.pending(session_id=record.id))

    async def run_info(view: RunView) -> RunInfo:
        pending = [p.approval_id for p in host.pending_under(view.run_id)]
        return RunInfo(
            run_id=view.run_id,
            session_id=view.session_id,
            status=view.status,
            reason=view.reason,
            final_text=view.final_text,
            pending_approvals=pending,
        )

    async def wait_for_run(run_id: str, wait_s: float, ctx: Context, *, after_seq: int = 0) -> RunInfo:
        """Wait up to wait_s for the run to end or to need an approval, reporting progress as events arrive.

        ``after_seq``: no event of the run is as old (a run started after it was the session's newest).
        """
        view = await host.view(run_id)
        deadline = anyio.current_time() + wait_s
        seen = after_seq
        while view.status in ("running", "queued") and anyio.current_time() < deadline:
            with anyio.move_on_after(min(1.0, deadline - anyio.current_time())):
                await host.wait(run_id, deadline - anyio.current_time())
            for event in await _run_events_since(host, view.session_id, run_id, seen):
                seen = event.seq or seen
                await ctx.report_progress(seen, None, _summary(event))
            view = await host.view(run_id)
        return await run_info(view)

    @face.tool()
    async def create_session(
        cwd: str,
        model: str | None = None,
        mode: str | None = None,
        headless: bool = False,
        parent_session_id: str | None = None,
        agent: str | None = None,
        allow: list[str] | None = None,
        advisor: str | None = None,
    ) -> SessionInfo:
        """Create an agent session working in directory ``cwd``.

        model: PROVIDER:NAME (anthropic:..., openai:..., scripted:PATH); default as configured.
        mode: 'ask' (the default: tools that may change things wait for approval), 'accept-edits' (file edits
        in the workspace run too), 'plan' (read-only) or 'bypass' (everything runs; deny rules still apply).
        headless: nobody will answer approvals, so calls that would wait for one are denied at once and
        the model is told why (for scripts and agents that cannot answer).
        parent_session_id: make it a child of that session, never freer than it: its mode (default the
        parent's), rules and tools are the parent's narrowed; cwd may be "" (the parent's) or a directory
        inside the parent's; it is headless if the parent is; its approvals also show on the parent's stream.
        agent: the agent definition a child runs as ($LOOM_HOME/agents, .loom/agents: its prompt, tools,
        model, mode). allow: globs over the child's namespaced tool names (fs__read, shell__*) it may use.
        advisor: 'off', 'lightweight' or 'full': a second model reviews the model's tool calls before policy
        (lightweight: only risky ones); default as configured. A child runs with its parent's.
        """
        if advisor is not None and advisor not in ADVISOR_MODES:
            raise ToolError(f"unknown advisor mode {advisor!r}; use {', '.join(ADVISOR_MODES)}")
        if parent_session_id is None and (agent is not None or allow is not None):
            raise ToolError("agent and allow are for a child session: give parent_session_id too")
        if parent_session_id is not None:
            if cwd:
                check_directory(cwd)
            with _tool_errors():
                session = await host.create_child(
                    parent_session_id, child_model, model=model, agent=agent, allow=allow, mode=mode, cwd=cwd
                )
                return session_info(await host.record(session.id))
        check_directory(cwd)
        with _tool_errors():
            chosen, notice = top_level_model(model, host.runtime.model, Path(cwd))
            mode = mode or "ask"
            session = await host.create_session(
                Path(cwd), chosen, mode, headless=headless, notice=notice, advisor=advisor
            )
            # A new id that only this process knows: what it appended is all there is, so the record need not
            # be read back. Nothing has measured its context yet, and no run of it can have started.
            last_seq = host.runtime.log.newest_held(session.id)
            if last_seq is None:
                return session_info(await host.record(session.id))
            return SessionInfo(
                session_id=session.id,
                cwd=str(session.cwd),
                model=chosen.name,
                mode=mode,
                archived=False,
                last_seq=last_seq,
            )

    @face.tool(annotations=_READ_ONLY)
    async def list_sessions(include_archived: bool = False) -> SessionList:
        """Sessions, newest first."""
        return SessionList(sessions=[session_info(r) for r in await host.list_sessions(include_archived)])

    @face.tool(annotations=_READ_ONLY)
    async def get_session(session_id: str) -> SessionInfo:
        """One session's state, including the seq of its newest event and the model's plan (todos)."""
        with _tool_errors():
            record = await host.record(session_id)
            return session_info(record).model_copy(update={"todos": await host.todos(record)})

    @face.tool()
    async def archive_session(session_id: str) -> SessionInfo:
        """Archive a session: hidden from list_sessions, kept in the store (never deleted)."""
        with _tool_errors():
            return session_info(await host.archive(session_id))

    @face.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True))
    async def rename_session(session_id: str, title: str = Field(max_length=10 * MAX_TITLE_CHARS)) -> SessionInfo:
        """Give a session a title for lists (empty: none).

        One line of at most 80 characters: control characters are dropped, whitespace collapsed, a longer title cut.
        """
        with _tool_errors():
            await host.record(session_id)  # an unknown id fails here, with the advice the other tools give
            if not await host.runtime.log.store.set_session_title(session_id, clean_title(title)):
                raise HostError(f"no session {session_id!r}; list_sessions shows the existing ones")
            return session_info(await host.record(session_id))

    @face.tool()
    async def send_message(
        session_id: str,
        text: str,
        ctx: Context,
        wait_s: float = Field(0.0, ge=0, le=MAX_WAIT_S),
        max_steps: int = Field(50, ge=1, le=1000),
        timeout_s: float | None = Field(None, gt=0, le=MAX_RUN_S),
    ) -> RunInfo:
        """Start a run answering ``text``; returns at once, or waits up to ``wait_s`` s for its end or an approval.

        timeout_s: the run's own deadline, from when it starts; past it the run is cancelled and ends failed
        ("timed out after ...").
        """
        with _tool_errors():
            # Taken before the run exists: every event of it is newer, so the wait can follow it from memory.
            before = host.runtime.log.newest_held(session_id) or 0
            handle = await host.start_run(session_id, text, max_steps, timeout_s=timeout_s)
            return await wait_for_run(handle.run_id, wait_s, ctx, after_seq=before)

    @face.tool()
    async def resume_run(
        run_id: str, ctx: Context, wait_s: float = Field(0.0, ge=0, le=MAX_WAIT_S), headless: bool = False
    ) -> RunInfo:
        """Continue an interrupted (or needs_review) run under its own id, without a new message.

        Finished tool calls are reused, never run again; a call that was in progress is run again only if its
        tool is read-only or idempotent, otherwise the run is needs_review and asks (list_approvals /
        decide_approval: approve_once runs it again, deny skips it with your reason shown to the model,
        cancel_run stops). Returns at once, or waits up to ``wait_s`` s like send_message. ``headless``: nobody
        will answer a review, so a call that needs one ends the run needs_review with nothing run again.
        """
        with _tool_errors():
            handle = await host.resume_run(run_id, headless=True if headless else None)
            return await wait_for_run(handle.run_id, wait_s, ctx)

    @face.tool(annotations=_READ_ONLY)
    async def get_run(run_id: str, ctx: Context, wait_s: float = Field(0.0, ge=0, le=MAX_WAIT_S)) -> RunInfo:
        """A run's status and, once completed, its final answer; ``wait_s`` waits for the end."""
        with _tool_errors():
            return await wait_for_run(run_id, wait_s, ctx)

    @face.tool()
    async def cancel_run(run_id: str) -> RunInfo:
        """Cancel a run; it is recorded as cancelled."""
        with _tool_errors():
            return await run_info(await host.cancel(run_id))

    @face.tool(annotations=_READ_ONLY)
    async def read_events(
        session_id: str,
        ctx: Context,
        after_seq: int = Field(0, ge=0, le=MAX_SEQ),
        wait_s: float = Field(0.0, ge=0, le=MAX_WAIT_S),
        limit: int = Field(200, ge=1, le=1000),
        live_cursor: str | None = None,
        stream: bool = False,
        before_seq: int | None = Field(None, ge=1, le=MAX_SEQ),
    ) -> EventPage:
        """Events of a session with seq > ``after_seq``, waiting up to ``wait_s`` for new ones, and the text in flight.

        Every client gets the same sequence: replay, then live, with no gap and no duplicate. ``live`` is the
        model step in flight: the text (and tool-call arguments) streamed so far, which no stored event holds
        until its assistant_message, the whole of it, is stored. Pass ``live.cursor`` back as ``live_cursor``
        ("" when ``live`` was null) to be sent only the new text, and to have ``wait_s`` end as soon as more
        arrives; without it ``live.text`` is all of it, and ``wait_s`` ends when it grows during the call.
        ``stream`` (with a progress token): the call stays open for ``wait_s`` and pushes each new page as a
        progress notification whose ``message`` is the page's JSON; the result is the page after the last one.
        ``before_seq`` reads backwards instead (no wait, no stream, no ``live``): the newest ``limit`` events with
        ``after_seq`` < seq < ``before_seq``, oldest first; ``more_before`` says whether older ones remain (pass
        the first event's seq as the next ``before_seq``). A client opening a long session reads its end this way
        (a ``before_seq`` past the newest event reads the newest), then follows from ``next_after_seq``.
        """
        log = host.runtime.log
        if log.newest_held(session_id) is None:  # a session whose events this log holds exists: skip the lookup
            with _tool_errors():
                await host.record(session_id)
        if before_seq is not None:
            return await read_back(log, session_id, after_seq, before_seq, limit)
        meta = ctx.request_context.meta
        if stream and meta is not None and meta.get("progress_token") is not None:
            pushed = itertools.count(1)

            async def push(page: EventPage) -> None:
                await ctx.report_progress(next(pushed), None, page.model_dump_json())

            return await stream_pages(log, session_id, after_seq, wait_s, limit, live_cursor, push)
        return await read_page(log, session_id, after_seq, wait_s, limit, live_cursor)

    @face.tool(annotations=_READ_ONLY)
    async def list_approvals(session_id: str | None = None) -> ApprovalList:
        """Tool calls waiting for a decision (all sessions, or one and its child sessions)."""
        return ApprovalList(approvals=[_approval(p, session_id) for p in host.pending(session_id=session_id)])

    @face.tool()
    async def decide_approval(
        approval_id: str, decision: str, ctx: Context, reason: str = "", decided_by: str = ""
    ) -> ApprovalInfo:
        """Decide a pending approval; the first decision wins.

        decision: 'approve_once', 'approve_session' (this tool for the rest of the session) or 'deny'
        (the reason is shown to the model).
        """
        who = decided_by or client_of(ctx)
        with _tool_errors():
            return _approval(await host.decide(approval_id, decision, reason, who))

    def ask_reviewer(approval_id: str) -> Elicit[ApprovalAnswer]:
        with _tool_errors():
            p = host.pending_approval(approval_id)
        arguments = json.dumps(p.arguments, ensure_ascii=False)[:500]
        return Elicit(f"Loom asks to run {p.tool} {arguments} ({p.reason}). Decide:", ApprovalAnswer)

    async def review_approval(approval_id: str, ctx: Context, answer: Any) -> ApprovalInfo:
        """Ask your user about a pending approval through MCP elicitation, then apply their decision.

        Needs a client that supports elicitation; otherwise call decide_approval. Declining or cancelling the
        question leaves the approval pending.
        """
        with _tool_errors():
            if not isinstance(answer, AcceptedElicitation):
                return _approval(host.pending_approval(approval_id))
            return _approval(
                await host.decide(
                    approval_id,
                    answer.data.decision,
                    answer.data.reason,
                    client_of(ctx),
                )
            )

    # The resolver is a closure over ``host``; with postponed annotations a string could not name it, so
    # the parameter's real annotation is set here, before the SDK reads the signature.
    review_approval.__annotations__["answer"] = Annotated[ElicitationResult[ApprovalAnswer], Resolve(ask_reviewer)]
    face.add_tool(review_approval, name="review_approval", description=inspect.getdoc(review_approval))
    add_rewind_tools(face, host)
    add_context_tools(face, host)
    add_command_tools(face, host)
    add_orchestrate_tools(face, host)
    add_goal_tools(face, host)
    add_review_tools(face, host)
    add_server_tools(face, host)
    add_question_tools(face, host)
    add_handoff_tools(face, host)
    return face


@contextlib.contextmanager
def _tool_errors() -> Iterator[None]:
    """Turn the host's refusals (unknown id, bad directory, bad policy file) into error results the caller reads."""
    try:
        yield
    except (HostError, ModelSpecError) as exc:
        raise ToolError(str(exc)) from exc


async def _run_events_since(host: SessionHost, session_id: str, run_id: str, after_seq: int) -> list[Event]:
    """The run's stored events with seq > ``after_seq``: from the log's memory where it holds them, else the store."""
    log = host.runtime.log
    held = log.stored_since(session_id, after_seq, TAIL_EVENTS)
    if held is None:
        return await log.store.read_events(session_id, run_id=run_id, after_seq=after_seq)
    return [event for event in held if getattr(event, "run_id", None) == run_id]


def _summary(event: Event) -> str:
    tool = getattr(event, "tool", None)
    return f"{event.type} {tool}" if tool else event.type
