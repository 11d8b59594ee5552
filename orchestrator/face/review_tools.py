"""The face's review tools: a reviewer child examines a change (or a run, against its goal) and gives a verdict.

``review`` collects the change (:mod:`orchestrator.agents.review_git`), starts the built-in ``reviewer`` agent as a
child session in ``plan`` mode (read-only: no level of its chain lets it change the tree) and waits up to ``wait_s``
for its verdict; ``review_result`` waits again on a review still going. The reviewer is a child of the session
given, or of a review session made for it (``plan``, headless: nobody is asked anything), so it is listed,
attached to and answered like any child. Its answer is read by :func:`orchestrator.agents.review.read_verdict`:
findings point inside the reviewed tree, and an unreadable answer is ``changes_needed``, never a pass.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from orchestrator.agents.review import change_brief, read_verdict, run_brief
from orchestrator.agents.review_git import Change, ReviewError, collect_change
from orchestrator.events import RunFinished, RunQueued, UserMessage
from orchestrator.face.input import check_directory
from orchestrator.face.models import child_model, top_level_model
from orchestrator.models import ModelSpecError
from orchestrator.protocol import MAX_WAIT_S
from orchestrator.protocol_review import ReviewInfo
from orchestrator.runtime.host import HostError, SessionHost
from orchestrator.store.session_view import clean_title

__all__ = ["REVIEWER", "REVIEW_MAX_STEPS", "REVIEW_TIMEOUT_S", "add_review_tools"]

REVIEWER = "reviewer"
"""The agent definition a reviewer runs as: Loom's built-in one, unless the user's or project's replaces it."""
REVIEW_MAX_STEPS = 30
REVIEW_TIMEOUT_S = 900.0
"""A reviewer's run's own deadline: past it the review ends ``failed``."""
_GOING = frozenset({"running", "queued", "awaiting_approval", "needs_review"})
_TITLE = "review: "


def _refused(exc: Exception) -> ToolError:
    return ToolError(str(exc))


async def _run_change(host: SessionHost, run_id: str) -> tuple[str, Path]:
    """The brief for reviewing run ``run_id`` against its goal, and the run's directory."""
    view = await host.view(run_id)
    if view.status in _GOING:
        raise HostError(f"run {run_id!r} is {view.status}; review it once it has ended")
    record = await host.record(view.session_id)
    events = await host.runtime.log.store.read_events(view.session_id, run_id=run_id)
    goal = next((e.text for e in events if isinstance(e, UserMessage | RunQueued)), "")
    ended = next((e for e in reversed(events) if isinstance(e, RunFinished)), None)
    from servers.subagents import summarize  # the same summary a parent gets of its child's run

    final = ended.final_text if ended is not None else view.final_text
    summary = summarize(events, run_id, final)
    brief = run_brief(
        run_id=run_id,
        goal=goal,
        final_text=final,
        status=view.status + (f" ({view.reason})" if view.reason and view.status != "completed" else ""),
        files_changed=summary.files_changed,
        commands_run=summary.commands_run,
        cwd=record.cwd,
    )
    return brief, Path(record.cwd)


async def _result(host: SessionHost, run_id: str, wait_s: float, *, files: list[str] | None = None) -> ReviewInfo:
    """The review whose reviewer runs ``run_id``: its verdict once the run has ended, else where it is."""
    view = await host.view(run_id)
    record = await host.record(view.session_id)
    if record.agent != REVIEWER or not record.parent_session_id:
        raise HostError(f"run {run_id!r} is not a reviewer's run; review starts one")
    deadline = anyio.current_time() + wait_s
    while view.status in ("running", "queued") and anyio.current_time() < deadline:
        await host.wait(run_id, deadline - anyio.current_time())
        view = await host.view(run_id)
    info = ReviewInfo(
        status="running",
        target=record.title.removeprefix(_TITLE),
        cwd=record.cwd,
        files=files or [],
        session_id=record.parent_session_id,
        reviewer_session_id=record.id,
        run_id=run_id,
        run_status=view.status,
    )
    if view.status in _GOING:
        info.detail = f"the reviewer is {view.status.replace('_', ' ')}; review_result waits for its verdict"
        return info
    if view.status != "completed":
        # Fail closed: a review that did not finish is no verdict, and never a pass.
        info.status = "failed"
        info.detail = f"the reviewer's run ended {view.status}" + (f": {view.reason}" if view.reason else "")
        return info
    read = await anyio.to_thread.run_sync(read_verdict, view.final_text, Path(record.cwd))
    info.status = "reviewed"
    info.verdict = "pass" if read.passed else "changes_needed"
    info.findings = read.findings
    if not read.readable:
        info.detail = "the reviewer's answer held no verdict, so the change was not accepted"
    return info


def add_review_tools(face: MCPServer, host: SessionHost) -> None:
    """Register ``review`` and ``review_result`` on ``face``."""

    @face.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False))
    async def review(
        cwd: str = "",
        session_id: str | None = None,
        target: str = "",
        run_id: str | None = None,
        model: str | None = None,
        wait_s: float = Field(0.0, ge=0, le=MAX_WAIT_S),
    ) -> ReviewInfo:
        """A reviewer child examines a change and answers pass or changes_needed, with findings at file and line.

        What it reviews: the uncommitted changes under ``cwd`` (``git diff HEAD`` and the untracked files); with
        ``target``, a path under it or a git revision or range (``main..HEAD``); with ``run_id``, that run against
        its goal (its message), from its events: the files it changed, its commands, its answer. ``session_id``:
        the reviewer is that session's child (``cwd`` defaults to its directory); without it a review session is
        made in ``cwd`` for it. The reviewer runs as the ``reviewer`` agent in plan mode: it cannot change the
        tree. ``model`` overrides its model. Returns at once (``status`` ``running``; ``review_result`` waits for
        the verdict) or waits up to ``wait_s``; ``nothing_to_review`` when nothing changed (no reviewer started).
        """
        if run_id is not None and target:
            raise ToolError("give either target (a change under cwd) or run_id (a run), not both")
        if not cwd and session_id is None and run_id is None:
            raise ToolError("give cwd (the directory whose changes to review) or session_id")
        if cwd:
            check_directory(cwd)
        try:
            change: Change | None = None
            if run_id is not None:
                brief, where = await _run_change(host, run_id)
                where = Path(cwd) if cwd else where
                shown = f"run {run_id}"
            else:
                where = Path(cwd) if cwd else Path((await host.record(session_id or "")).cwd)
                change = await collect_change(where, target)
                if change.empty:
                    return ReviewInfo(
                        status="nothing_to_review",
                        target=change.target,
                        cwd=str(change.root),
                        session_id=session_id or "",
                        detail=f"nothing to review: no changes ({change.target}) under {change.root}",
                    )
                brief, where, shown = change_brief(change), change.root, change.target
            parent = session_id
            if parent is None:
                chosen, notice = top_level_model(model, host.runtime.model, where)
                made = await host.create_session(where, chosen, "plan", headless=True, notice=notice)
                parent = made.id
                await host.runtime.log.store.set_session_title(parent, clean_title(_TITLE + shown))
            child = await host.create_child(
                parent, child_model, model=model, agent=REVIEWER, mode="plan", cwd=str(where)
            )
            await host.runtime.log.store.set_session_title(child.id, clean_title(_TITLE + shown))
            handle = await host.start_run(child.id, brief, REVIEW_MAX_STEPS, timeout_s=REVIEW_TIMEOUT_S)
            files = [*change.files, *change.untracked] if change is not None else []
            return await _result(host, handle.run_id, wait_s, files=files)
        except (HostError, ReviewError, ModelSpecError) as exc:
            raise _refused(exc) from exc

    @face.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False))
    async def review_result(run_id: str, wait_s: float = Field(0.0, ge=0, le=MAX_WAIT_S)) -> ReviewInfo:
        """The verdict of a review (``run_id`` is the reviewer's run, from ``review``), waiting up to ``wait_s``."""
        try:
            return await _result(host, run_id, wait_s)
        except HostError as exc:
            raise _refused(exc) from exc
