"""Giving an open session its hooks: SessionStart as it opens, SessionEnd as it closes.

The runtime (:meth:`orchestrator.runtime.runtime.Runtime.open_session`) reads the hooks files once per opening and
wraps the open session in :func:`attached`. A session without any handler gets no :class:`SessionHooks` at all.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from orchestrator.hooks.config import HooksConfig
from orchestrator.hooks.session import SessionHooks
from orchestrator.hooks.transcript import TRANSCRIPTS, Transcript

if TYPE_CHECKING:
    from orchestrator.runtime.session import Session

__all__ = ["attached"]


@contextlib.asynccontextmanager
async def attached(session: Session, config: HooksConfig, *, fresh: bool) -> AsyncIterator[None]:
    """Give ``session`` its hooks for as long as it is open (``fresh``: it was just created, not reopened)."""
    if not config:
        yield
        return
    hooks = SessionHooks(
        config,
        session_id=session.id,
        cwd=session.cwd,
        log=session.log,
        child=session.lineage.is_child,
        mode=lambda: session.approvals.mode,
        transcript=Transcript(session.home / TRANSCRIPTS / f"{session.id}.jsonl", session.history)
        if session.home is not None
        else None,
    )
    session.hooks = session.compactor.hooks = hooks
    await hooks.session_start("startup" if fresh else "resume")
    try:
        yield
    finally:
        await hooks.session_end("other")
