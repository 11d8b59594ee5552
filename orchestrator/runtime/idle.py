"""Which of a host's open sessions to close: those idle too long, and the least recently used past a cap.

An open session holds its tools (Loom's in-process servers and the configured external ones, each a
connection, some a process) and its history. A daemon that kept every session it ever opened would grow by
all of that per session, for ever; :class:`~orchestrator.runtime.host.SessionHost` instead closes the
sessions this module picks and reopens them from the store when they are next used. Nothing here does I/O:
the host says which sessions are busy, this module says which idle ones go.

A session is *busy* while a run of it is in progress or queued, an approval of it waits, or it is compacting
or switching models; a busy session is never closed, however long it has been open or however many are.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Set
from dataclasses import dataclass, field

import anyio

from orchestrator.config import SessionLimits
from orchestrator.runtime.host_runs import LiveRuns, RunHandle
from orchestrator.runtime.session import Session

logger = logging.getLogger(__name__)

IDLE_GRACE_S = 1.0
"""A session used less than this long ago is not closed even past ``maxOpen``: a caller that has just been
handed the session (``SessionHost.session``) is about to use it, and closing it under that caller would fail
its request. The cap is therefore soft for sessions used within the last second."""

CLOSE_WAIT_S = 10.0
"""How long closing one idle session may take (its servers' shutdown) before the host stops waiting for it."""


@dataclass(eq=False, slots=True)
class OpenSession:
    """One session a host holds open, and the events that close it."""

    session_id: str
    used: float
    """``anyio.current_time()`` of its last use: opened, handed to a caller, or a run of it ended."""
    session: Session | None = None
    """None until its tools are connected."""
    close: anyio.Event = field(default_factory=anyio.Event)
    """Set to close the session: the task that owns it leaves ``Runtime.open_session``, disconnecting its tools."""
    closed: anyio.Event = field(default_factory=anyio.Event)
    """Set when that task has ended."""


def to_close(
    entries: Iterable[OpenSession],
    now: float,
    limits: SessionLimits,
    busy: Callable[[OpenSession], bool],
    *,
    grace_s: float = IDLE_GRACE_S,
) -> list[OpenSession]:
    """The open sessions to close now.

    Those idle past ``limits.idle_close_s``, then the least recently used ones while more than
    ``limits.max_open`` would stay open. Busy ones and those used within ``grace_s`` stay.
    """
    entries = list(entries)
    idle = [e for e in entries if e.session is not None and now - e.used >= grace_s and not busy(e)]
    stale = [e for e in idle if now - e.used >= limits.idle_close_s]
    excess = len(entries) - len(stale) - limits.max_open
    if excess <= 0:
        return stale
    chosen = {e.session_id for e in stale}
    rest = sorted((e for e in idle if e.session_id not in chosen), key=lambda e: e.used)
    return stale + rest[:excess]


class IdleCloser:
    """The part of :class:`~orchestrator.runtime.host.SessionHost` that closes idle sessions (a base class of it)."""

    sessions: dict[str, Session]
    runs: dict[str, RunHandle]
    live: LiveRuns
    limits: SessionLimits
    _grace_s: float
    _held: dict[str, OpenSession]
    _leaving: dict[str, OpenSession]
    _headless: set[str]
    _wake: anyio.Event
    _closing: anyio.Event

    def held(self, session_id: str) -> OpenSession | None:
        """The session's entry while it is open (when it was last used, the events that close it), else None."""
        return self._held.get(session_id)

    def busy(self, session_id: str, running: Set[str] | None = None) -> bool:
        """Whether the session has a run in progress or queued, an approval waiting, or a compaction or switch.

        ``running``: the sessions with a run not done, when the caller asks about many (see :meth:`_running`).
        """
        if session_id in (running if running is not None else self._running()):
            return True
        session = self.sessions.get(session_id)
        return session is not None and (session.busy or bool(session.approvals.pending))

    def _running(self) -> set[str]:
        return self.live.sessions()

    async def close_idle(self) -> list[str]:
        """Close the idle sessions that :func:`~orchestrator.runtime.idle.to_close` picks; returns their ids.

        The host does this by itself (after a session opens, after a run ends, and every few seconds); a caller
        may ask for it now.
        """
        running = self._running()
        doomed = to_close(
            self._held.values(),
            anyio.current_time(),
            self.limits,
            lambda e: self.busy(e.session_id, running),
            grace_s=self._grace_s,
        )
        # Out of the maps before the first await: from here on a caller asking for one of them reopens it.
        for entry in doomed:
            del self._held[entry.session_id]
            session = self.sessions.pop(entry.session_id)
            if session.approvals.headless:
                self._headless.add(entry.session_id)
            self._leaving[entry.session_id] = entry
            entry.close.set()
        # Those another call (the host's own sweep) is closing count too: when this returns, they are all closed.
        for entry in [*self._leaving.values()]:
            with anyio.move_on_after(CLOSE_WAIT_S):
                await entry.closed.wait()
            if self._leaving.get(entry.session_id) is entry:
                del self._leaving[entry.session_id]
            # A finished run's handle is only a copy of its record: views of it come from the store from now on.
            for run_id in [r for r, h in self.runs.items() if h.session_id == entry.session_id and h.done.is_set()]:
                del self.runs[run_id]
        if doomed:
            logger.debug("closed %d idle session(s); %d open", len(doomed), len(self._held))
        return [e.session_id for e in doomed]

    async def _close_idle_forever(self) -> None:
        # Woken when a session opens or a run ends (the cap), and at least every ``tick`` s (the idle time).
        tick = max(0.05, min(30.0, self.limits.idle_close_s / 4))
        while not self._closing.is_set():
            with anyio.move_on_after(tick):
                await self._wake.wait()
            self._wake = anyio.Event()
            if self._closing.is_set():
                return
            await self.close_idle()

    def _touch(self, session_id: str) -> None:
        entry = self._held.get(session_id)
        if entry is not None:
            entry.used = anyio.current_time()
