"""Typed calls to Loom's face, over whichever connection :func:`clients.loom.open_client` made.

Every method is one face tool: its arguments are the tool's, its result the tool's structured result read
back as the model of :mod:`orchestrator.protocol`. A tool's refusal (an unknown id, a bad directory, a run
that cannot be resumed) raises :class:`FaceError` with the face's own message.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from clients.loom.follow import LiveFollower
from orchestrator.protocol import (
    ApprovalInfo,
    ApprovalList,
    CheckpointList,
    CompactionInfo,
    Event,
    EventPage,
    ModelSwitchInfo,
    RewindInfo,
    RunInfo,
    SessionInfo,
    SessionList,
)
from orchestrator.protocol_commands import ModeInfo, SkillList
from orchestrator.protocol_long import HandoffReport, MemoryArchiveInfo
from orchestrator.protocol_questions import QuestionInfo, QuestionList
from orchestrator.protocol_review import ReviewInfo
from orchestrator.protocol_servers import ModelList, ServerList

if TYPE_CHECKING:
    from mcp import Client

    from orchestrator.agents.report import Report
    from orchestrator.events_long import GoalBudget
    from orchestrator.protocol_long import GoalReport

__all__ = ["FaceError", "LoomClient"]

M = TypeVar("M", bound=BaseModel)

FOLLOW_WAIT_S = 30.0
"""How long one ``read_events`` long-poll of :meth:`LoomClient.follow` waits (the face allows up to 60 s)."""


class FaceError(Exception):
    """A face tool answered with an error; the message is the tool's."""

    def __init__(self, message: str, tool: str) -> None:
        super().__init__(message)
        self.tool = tool


class LoomClient:
    """A client of Loom's face: the daemon's over HTTP, or an in-process one.

    Args:
        session: the MCP client connected to the face.
        on_daemon: whether the face is a daemon's (its runs outlive this process).
    """

    def __init__(self, session: Client, *, on_daemon: bool) -> None:
        self.session = session
        self.on_daemon = on_daemon

    async def call(self, tool: str, result: type[M], **arguments: Any) -> M:
        """Call a face tool and read its structured result as ``result``.

        Raises:
            FaceError: the tool answered with an error.
        """
        answer = await self.session.call_tool(tool, arguments)
        if answer.is_error or answer.structured_content is None:
            text = " ".join(getattr(b, "text", "") for b in answer.content).strip()
            raise FaceError(text.removeprefix(f"Error executing tool {tool}: ") or f"{tool} failed", tool)
        return result.model_validate(answer.structured_content)

    # -- sessions ------------------------------------------------------------------------------------

    async def create_session(
        self,
        cwd: str,
        *,
        model: str | None = None,
        mode: str | None = None,
        headless: bool = False,
        parent_session_id: str | None = None,
        agent: str | None = None,
        allow: list[str] | None = None,
    ) -> SessionInfo:
        """A new session working in ``cwd`` (``model`` None: as configured; ``mode`` None: ``ask``).

        With ``parent_session_id`` it is a child of that session, never freer than it (``cwd`` may be ``""``: the
        parent's; ``mode`` None: the parent's); ``agent`` names the agent definition it runs as and ``allow`` its
        allow-list of namespaced tool globs.
        """
        arguments: dict[str, Any] = {"cwd": cwd, "model": model, "mode": mode, "headless": headless}
        if parent_session_id is not None:
            arguments |= {"parent_session_id": parent_session_id, "agent": agent, "allow": allow}
        return await self.call("create_session", SessionInfo, **arguments)

    async def list_sessions(self, *, include_archived: bool = False) -> list[SessionInfo]:
        """Sessions, newest first."""
        return (await self.call("list_sessions", SessionList, include_archived=include_archived)).sessions

    async def get_session(self, session_id: str) -> SessionInfo:
        """One session, with the seq of its newest event."""
        return await self.call("get_session", SessionInfo, session_id=session_id)

    async def archive_session(self, session_id: str) -> SessionInfo:
        """Hide a session from :meth:`list_sessions` (it is kept)."""
        return await self.call("archive_session", SessionInfo, session_id=session_id)

    async def rename_session(self, session_id: str, title: str) -> SessionInfo:
        """Give a session a title (the face cleans it: one line, at most 80 characters; empty: none)."""
        return await self.call("rename_session", SessionInfo, session_id=session_id, title=title)

    # -- runs ----------------------------------------------------------------------------------------

    async def send_message(
        self, session_id: str, text: str, *, wait_s: float = 0, max_steps: int = 50, timeout_s: float | None = None
    ) -> RunInfo:
        """Start a run answering ``text``; waits up to ``wait_s`` for its end or an approval.

        ``timeout_s`` is the run's own deadline: past it the run ends ``failed`` ("timed out after ...").
        """
        arguments: dict[str, Any] = {"session_id": session_id, "text": text, "wait_s": wait_s, "max_steps": max_steps}
        if timeout_s is not None:
            arguments["timeout_s"] = timeout_s
        return await self.call("send_message", RunInfo, **arguments)

    async def get_run(self, run_id: str, *, wait_s: float = 0) -> RunInfo:
        """Where a run is; waits up to ``wait_s`` for its end or an approval."""
        return await self.call("get_run", RunInfo, run_id=run_id, wait_s=wait_s)

    async def resume_run(self, run_id: str, *, wait_s: float = 0, headless: bool = False) -> RunInfo:
        """Continue an interrupted run under its own id (``headless``: a review ends it ``needs_review``)."""
        return await self.call("resume_run", RunInfo, run_id=run_id, wait_s=wait_s, headless=headless)

    async def cancel_run(self, run_id: str) -> RunInfo:
        """Cancel a run; it is recorded as cancelled."""
        return await self.call("cancel_run", RunInfo, run_id=run_id)

    # -- events --------------------------------------------------------------------------------------

    async def read_events(
        self,
        session_id: str,
        *,
        after_seq: int = 0,
        wait_s: float = 0,
        limit: int = 200,
        live_cursor: str | None = None,
        before_seq: int | None = None,
    ) -> EventPage:
        """One page of a session's events after ``after_seq``, and the text in flight (``live``).

        With ``before_seq``, the newest ``limit`` events before it instead (oldest first, no wait, no ``live``);
        the page's ``more_before`` says whether older ones remain.
        """
        backwards = (
            {} if before_seq is None else {"before_seq": before_seq}
        )  # omitted when unused: an older face knows no such argument
        return await self.call(
            "read_events",
            EventPage,
            session_id=session_id,
            after_seq=after_seq,
            wait_s=wait_s,
            limit=limit,
            live_cursor=live_cursor,
            **backwards,
        )

    async def stream_events(
        self,
        session_id: str,
        on_page: Callable[[EventPage], None],
        *,
        after_seq: int = 0,
        wait_s: float = FOLLOW_WAIT_S,
        limit: int = 200,
        live_cursor: str | None = None,
    ) -> EventPage:
        """One ``read_events`` call held open for up to ``wait_s``: each page the face pushes goes to ``on_page``.

        The pushed pages (progress notifications) come in order, each continuing from the one before, and the
        returned page continues from the last of them. A face too old to stream answers with one page at once.
        """

        async def pushed(progress: float, total: float | None, message: str | None) -> None:
            if message is not None:
                on_page(EventPage.model_validate_json(message))

        arguments = {
            "session_id": session_id,
            "after_seq": after_seq,
            "wait_s": wait_s,
            "limit": limit,
            "live_cursor": live_cursor,
            "stream": True,
        }
        answer = await self.session.call_tool("read_events", arguments, progress_callback=pushed)
        if answer.is_error or answer.structured_content is None:
            text = " ".join(getattr(b, "text", "") for b in answer.content).strip()
            shown = text.removeprefix("Error executing tool read_events: ")
            raise FaceError(shown or "read_events failed", "read_events")
        return EventPage.model_validate(answer.structured_content)

    async def follow(
        self, session_id: str, *, after_seq: int = 0, every_message: bool = False, wait_s: float = FOLLOW_WAIT_S
    ) -> AsyncIterator[Event]:
        """A session's events from ``after_seq`` on, with its text as it is written, until the caller stops.

        The text in flight comes as ``text_delta`` (and ``tool_call_delta``) events, made from each page's
        ``live`` part, exactly once whether the caller attached before or in the middle of a message: see
        :class:`~clients.loom.follow.LiveFollower` (and ``every_message`` there).
        """
        follower = LiveFollower(session_id, after_seq, every_message=every_message)
        while True:
            for event in await follower.next(self, wait_s):
                yield event

    # -- approvals -----------------------------------------------------------------------------------

    async def list_approvals(self, session_id: str | None = None) -> list[ApprovalInfo]:
        """Tool calls waiting for a decision (all sessions, or one)."""
        return (await self.call("list_approvals", ApprovalList, session_id=session_id)).approvals

    async def decide_approval(
        self, approval_id: str, decision: str, *, reason: str = "", decided_by: str = ""
    ) -> ApprovalInfo:
        """``approve_once``, ``approve_session`` or ``deny`` (with a reason shown to the model); first one wins."""
        return await self.call(
            "decide_approval",
            ApprovalInfo,
            approval_id=approval_id,
            decision=decision,
            reason=reason,
            decided_by=decided_by,
        )

    async def list_questions(self, session_id: str | None = None) -> list[QuestionInfo]:
        """What MCP servers asked and nobody answered yet (all sessions, or one and its children)."""
        return (await self.call("list_questions", QuestionList, session_id=session_id)).questions

    async def answer_question(
        self, question_id: str, action: str, content: dict[str, Any] | None = None, *, answered_by: str = ""
    ) -> QuestionInfo:
        """``accept`` (with ``content`` matching the question's schema), ``decline`` or ``cancel``; first one wins."""
        return await self.call(
            "answer_question",
            QuestionInfo,
            question_id=question_id,
            action=action,
            content=content,
            answered_by=answered_by,
        )

    # -- context and rewind --------------------------------------------------------------------------

    async def compact_session(self, session_id: str, *, focus: str = "", preview: bool = False) -> CompactionInfo:
        """Compact an idle session's context now (``preview``: only say what it would do)."""
        return await self.call("compact_session", CompactionInfo, session_id=session_id, focus=focus, preview=preview)

    async def switch_model(self, session_id: str, model: str) -> ModelSwitchInfo:
        """Give an idle session another model, compacting first if its context would not fit."""
        return await self.call("switch_model", ModelSwitchInfo, session_id=session_id, model=model)

    async def list_checkpoints(self, session_id: str) -> CheckpointList:
        """The points a session can be rewound to, oldest first."""
        return await self.call("list_checkpoints", CheckpointList, session_id=session_id)

    async def rewind_session(self, session_id: str, to_run_id: str) -> RewindInfo:
        """Restore the files Loom's tools changed since ``to_run_id`` began, and branch the conversation there."""
        return await self.call("rewind_session", RewindInfo, session_id=session_id, to_run_id=to_run_id)

    # -- handoff and memory --------------------------------------------------------------------------

    async def handoff_session(
        self, session_id: str, instructions: str = "", *, keep_memory: bool = False, trigger: str = "manual"
    ) -> HandoffReport:
        """Hand an idle session off to a fresh one, starting from the handoff its model writes (the old is archived).

        ``trigger``: ``goal`` when a goal's controller hands off its work session.
        """
        arguments: dict[str, Any] = {"session_id": session_id, "instructions": instructions}
        if keep_memory:
            arguments["keep_memory"] = True
        if trigger != "manual":
            arguments["trigger"] = trigger
        return await self.call("handoff_session", HandoffReport, **arguments)

    async def get_handoff(self, session_id: str) -> HandoffReport:
        """The handoff a session wrote, or (a fresh session's id) the one it started from."""
        return await self.call("get_handoff", HandoffReport, session_id=session_id)

    async def archive_memory(self, session_id: str) -> MemoryArchiveInfo:
        """Promote the notes a session saved in its session namespace to its project's namespace."""
        return await self.call("archive_memory", MemoryArchiveInfo, session_id=session_id)

    # -- commands ------------------------------------------------------------------------------------

    async def set_mode(self, session_id: str, mode: str, *, changed_by: str = "") -> ModeInfo:
        """Change a session's policy mode (``ask``, ``accept-edits``, ``plan``, ``bypass``) from its next tool call."""
        return await self.call("set_mode", ModeInfo, session_id=session_id, mode=mode, changed_by=changed_by)

    async def list_skills(self, session_id: str) -> SkillList:
        """The skills a session's model can load, by name."""
        return await self.call("list_skills", SkillList, session_id=session_id)

    async def list_models(self) -> ModelList:
        """The models a session can run on (configured, default, used), with their context windows."""
        return await self.call("list_models", ModelList)

    async def list_servers(self, session_id: str | None = None) -> ServerList:
        """Each MCP server's state: ``session_id``'s live ones if it is open, else the configured ones probed."""
        arguments = {} if session_id is None else {"session_id": session_id}
        return await self.call("list_servers", ServerList, **arguments)

    # -- many agents: review and orchestrate ----------------------------------------------------------

    async def review(
        self,
        *,
        cwd: str = "",
        session_id: str | None = None,
        target: str = "",
        run_id: str | None = None,
        model: str | None = None,
        wait_s: float = 0,
    ) -> ReviewInfo:
        """Start a reviewer child on a change under ``cwd`` (or ``session_id``'s directory, or run ``run_id``)."""
        arguments: dict[str, Any] = {"cwd": cwd, "target": target, "wait_s": wait_s}
        for key, value in (("session_id", session_id), ("run_id", run_id), ("model", model)):
            if value is not None:
                arguments[key] = value
        return await self.call("review", ReviewInfo, **arguments)

    async def review_result(self, run_id: str, *, wait_s: float = 0) -> ReviewInfo:
        """A review's verdict (``run_id``: the reviewer's run), waiting up to ``wait_s`` for it."""
        return await self.call("review_result", ReviewInfo, run_id=run_id, wait_s=wait_s)

    async def orchestrate(
        self,
        session_id: str,
        goal: str,
        *,
        max_parallel: int = 4,
        task_timeout_s: float = 900.0,
        max_attempts: int = 3,
        wait_s: float = 0,
    ) -> Report:
        """Carry out ``goal`` in ``session_id`` as a task graph of child sessions; its first snapshot."""
        from orchestrator.agents.report import Report

        return await self.call(
            "orchestrate",
            Report,
            session_id=session_id,
            goal=goal,
            max_parallel=max_parallel,
            task_timeout_s=task_timeout_s,
            max_attempts=max_attempts,
            wait_s=wait_s,
        )

    async def get_orchestration(
        self, session_id: str, orchestration_id: str | None = None, *, wait_s: float = 0
    ) -> Report:
        """An orchestration's snapshot (the session's newest by default), waiting up to ``wait_s`` for its end."""
        from orchestrator.agents.report import Report

        arguments: dict[str, Any] = {"session_id": session_id, "wait_s": wait_s}
        if orchestration_id is not None:
            arguments["orchestration_id"] = orchestration_id
        return await self.call("get_orchestration", Report, **arguments)

    async def cancel_orchestration(
        self, session_id: str, orchestration_id: str | None = None, *, reason: str = ""
    ) -> Report:
        """End an orchestration (the session's newest by default): its children cancelled; its snapshot after."""
        from orchestrator.agents.report import Report

        arguments: dict[str, Any] = {"session_id": session_id, "reason": reason}
        if orchestration_id is not None:
            arguments["orchestration_id"] = orchestration_id
        return await self.call("cancel_orchestration", Report, **arguments)

    # -- goals ---------------------------------------------------------------------------------------

    async def start_goal(
        self,
        goal: str,
        criteria: list[str],
        *,
        budget: GoalBudget | None = None,
        cwd: str = "",
        mode: str = "",
        model: str = "",
    ) -> GoalReport:
        """Work toward ``goal`` over sessions until every criterion passes or ``budget`` is spent; its first report."""
        from orchestrator.protocol_long import GoalReport

        return await self.call(
            "start_goal",
            GoalReport,
            goal=goal,
            criteria=criteria,
            budget=(budget.model_dump(exclude_none=True) if budget is not None else {}),
            cwd=cwd,
            mode=mode,
            model=model,
        )

    async def get_goal(self, goal_id: str, *, wait_s: float = 0) -> GoalReport:
        """A goal's report, waiting up to ``wait_s`` for its end."""
        from orchestrator.protocol_long import GoalReport

        return await self.call("get_goal", GoalReport, goal_id=goal_id, wait_s=wait_s)

    async def list_goals(self) -> list[GoalReport]:
        """Every goal, newest first."""
        from orchestrator.protocol_long import GoalList

        return (await self.call("list_goals", GoalList)).goals

    async def resume_goal(self, goal_id: str) -> GoalReport:
        """Carry on a goal that nothing drives (Loom stopped while it ran); its report at once."""
        from orchestrator.protocol_long import GoalReport

        return await self.call("resume_goal", GoalReport, goal_id=goal_id)

    async def cancel_goal(self, goal_id: str) -> GoalReport:
        """End a goal (its running child cancelled); its report after."""
        from orchestrator.protocol_long import GoalReport

        return await self.call("cancel_goal", GoalReport, goal_id=goal_id)
