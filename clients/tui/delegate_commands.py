"""``/review`` and ``/orchestrate``: the commands that hand work to child sessions, through the face's tools.

Both run in the command runner's workers (:mod:`clients.tui.command_runner`), every face call bounded, so the UI
never waits. ``/review [TARGET]`` starts a reviewer as a child of the shown session (its child block shows it
working, its approvals come up on this conversation), then polls ``review_result`` in bounded long-polls until the
verdict is in and shows it as a :class:`~clients.tui.review_view.ReviewBlock`. ``/orchestrate GOAL`` starts an
orchestration in the shown session; its graph block is drawn from the session's events
(:mod:`clients.tui.graph_view`), so nothing here follows it. ``/orchestrate cancel`` ends it, and ``/orchestrate``
alone says where it is. Without a session yet, ``/review`` and ``/orchestrate GOAL`` make one here, as a first
message would.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

import anyio

from clients.loom import FaceError, LoomClient
from clients.tui.review_view import ReviewBlock
from orchestrator.protocol_review import ReviewInfo

if TYPE_CHECKING:
    from clients.tui.app import LoomApp

__all__ = ["CALL_TIMEOUT_S", "POLL_S", "CommandRefused", "DelegateCommands"]

CALL_TIMEOUT_S = 15.0
"""Starting an orchestration, reading or cancelling one: answers in milliseconds, or the daemon is gone."""
REVIEW_START_S = 60.0
"""``review`` collects the change from git (bounded in time and size by the face) before it answers."""
CANCEL_TIMEOUT_S = 30.0
"""``cancel_orchestration`` waits up to 10 s for the children to stop before it answers."""
POLL_S = 20.0
"""One ``review_result`` long-poll."""
CALL_MARGIN_S = 15.0
REVIEW_DEADLINE_S = 960.0
"""How long the verdict is waited for: the reviewer's own run ends failed past 900 s."""

Notice = Callable[[str, Literal["info", "warning", "error"]], None]


class CommandRefused(Exception):
    """The command cannot run as things are; the message says what to do."""


class DelegateCommands:
    """``/review`` and ``/orchestrate`` for ``app``; ``notice`` shows a quiet line in its conversation."""

    def __init__(self, app: LoomApp, notice: Notice) -> None:
        self.app = app
        self.notice = notice

    async def review(self, loom: LoomClient, target: str) -> None:
        """``/review [TARGET]``: a reviewer child of the shown session, and its verdict as a block."""
        session_id = await self._session(loom, make=True)
        with anyio.fail_after(REVIEW_START_S):
            info = await loom.review(session_id=session_id, target=target)
        if info.status == "nothing_to_review":
            self.notice(info.detail or "nothing to review", "info")
            return
        if info.status == "running":
            files = f" ({len(info.files)} file{'s' if len(info.files) != 1 else ''})" if info.files else ""
            self.notice(f"reviewing {info.target}{files}: the reviewer's block shows its work", "info")
            info = await self._verdict(info)
        if self.app.session_id == session_id:
            self.app.conversation.add_block(lambda: ReviewBlock(info))
        else:  # the user went to another session meanwhile: the verdict must not land in its conversation
            self.app.notify(f"review of {info.target} in {session_id}: {_verdict_word(info)}", timeout=15)

    async def orchestrate(self, loom: LoomClient, args: str) -> None:
        """``/orchestrate GOAL`` starts one, ``/orchestrate cancel`` ends it, ``/orchestrate`` says where it is."""
        if not args:
            session_id = await self._session(loom, make=False)
            with anyio.fail_after(CALL_TIMEOUT_S):
                report = await loom.get_orchestration(session_id)
            self.notice(report.text(), "info")
        elif args == "cancel":
            session_id = await self._session(loom, make=False)
            with anyio.fail_after(CANCEL_TIMEOUT_S):
                report = await loom.cancel_orchestration(session_id, reason="cancelled from the TUI")
            self.notice(f"orchestration {report.orchestration_id}: {report.status}", "info")
        else:
            session_id = await self._session(loom, make=True)
            with anyio.fail_after(CALL_TIMEOUT_S):
                report = await loom.orchestrate(session_id, args)
            self.notice(
                f"orchestration {report.orchestration_id} started: its graph shows here as it runs "
                "(/orchestrate cancel ends it)",
                "info",
            )

    async def _session(self, loom: LoomClient, *, make: bool) -> str:
        """The shown session; with none yet, one made here (``make``) or a refusal."""
        if self.app.session_id is not None:
            return self.app.session_id
        if not make:
            raise CommandRefused("there is no session yet; send a message or /orchestrate GOAL first")
        app = self.app
        with anyio.fail_after(CALL_TIMEOUT_S):
            info = await loom.create_session(str(app.cwd), model=app.model, mode=app.mode)
        app.switch_to(info.session_id)
        return info.session_id

    async def _verdict(self, info: ReviewInfo) -> ReviewInfo:
        """Poll ``review_result`` until the reviewer has ended (bounded), riding out a reconnection."""
        deadline = anyio.current_time() + REVIEW_DEADLINE_S
        told = False
        while info.status == "running" and anyio.current_time() < deadline:
            if info.run_status == "awaiting_approval" and not told:
                self.notice("the reviewer waits for an approval (its card is in this conversation)", "warning")
                told = True
            loom = self.app.loom  # after a reconnection, the new link
            if loom is None:
                await anyio.sleep(1.0)
                continue
            try:
                with anyio.fail_after(POLL_S + CALL_MARGIN_S):
                    info = await loom.review_result(info.run_id, wait_s=POLL_S)
            except FaceError:
                raise
            except Exception:  # the link broke (the connection worker reconnects): ask again on the next one
                await anyio.sleep(1.0)
        if info.status == "running":
            info = info.model_copy(
                update={
                    "status": "failed",
                    "detail": f"no verdict after {REVIEW_DEADLINE_S:.0f} s; the reviewer's "
                    f"session {info.reviewer_session_id} may still answer",
                }
            )
        return info


def _verdict_word(info: ReviewInfo) -> str:
    if info.status != "reviewed":
        return f"no verdict ({info.detail})"
    count = f"{len(info.findings)} finding{'s' if len(info.findings) != 1 else ''}"
    return f"{'pass' if info.verdict == 'pass' else 'changes needed'}, {count}"
