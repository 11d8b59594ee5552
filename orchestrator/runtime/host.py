"""The session host: long-lived sessions whose runs go on in the background.

The MCP face (:mod:`orchestrator.face.server`) drives this; nothing here knows about MCP. Each open
session's tools stay connected in a task the host owns (a hub holds task groups, which must be entered
and left in one task) until the session is closed: when the host closes, or when the session has been idle
too long or is the least recently used past the cap (``sessions`` in the config, see
:mod:`orchestrator.runtime.idle`). A session with a run in progress or queued, or an approval waiting, is
never closed; a closed one is reopened from the store the next time it is used, so memory and server
connections are bounded by the sessions in use, not by every session ever opened. Each run is a task with
its own cancel scope, so a call that starts a run returns at once and another call can cancel it.

Sessions and runs are plain ids that survive restarts: a session not open in this process is
reopened from the store (history rebuilt from its events), and runs are read from the store. On
start, runs a crash left ``running`` are marked ``interrupted``; on close, runs still going are
recorded as ``interrupted`` too. An interrupted run can be resumed under its own id
(:meth:`SessionHost.resume_run`, see :mod:`orchestrator.loop.resume`); while it waits for a reviewer to
decide about a call the interruption left unfinished, its status is ``needs_review``.

Run views, cancelling and approvals are in :mod:`orchestrator.runtime.host_runs` (a base class of the host).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Self

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup

from orchestrator.config import SessionLimits
from orchestrator.events import RunQueued, RunStarted
from orchestrator.loop.approvals import MODES
from orchestrator.loop.resume import RESUMABLE, ResumeError, find_resume_point
from orchestrator.models.base import Model
from orchestrator.runtime.children import reopening
from orchestrator.runtime.goals import Goals
from orchestrator.runtime.handoff import Handoffs, HandoffSeed
from orchestrator.runtime.host_children import ChildHost
from orchestrator.runtime.host_records import SessionRecords
from orchestrator.runtime.host_remote import adopt_remote, follow_remote, refuse_resume
from orchestrator.runtime.host_runs import HostError, LiveRuns, RunDesk, RunHandle, RunView
from orchestrator.runtime.idle import CLOSE_WAIT_S, IDLE_GRACE_S, IdleCloser, OpenSession
from orchestrator.runtime.orchestrations import Orchestrations
from orchestrator.runtime.owner import this_process
from orchestrator.runtime.runtime import ChildOpening, RunResult, Runtime, Session, new_id

if TYPE_CHECKING:
    from orchestrator.engine.face import RemoteRuns

__all__ = ["HostError", "ModelResolver", "RunHandle", "RunView", "SessionHost"]

logger = logging.getLogger(__name__)

ModelResolver = Callable[[str, Path], Model]
"""Builds the model named by a stored spec, for sessions reopened from the store."""


def _resolve(spec: str, cwd: Path) -> Model:
    from orchestrator.models import resolve_model

    return resolve_model(spec, base_dir=cwd)


class SessionHost(RunDesk, SessionRecords, IdleCloser, ChildHost):
    """Owns sessions and their background runs for the life of one runtime.

    ``limits`` (default: :class:`~orchestrator.config.SessionLimits`) say how long an idle session stays open and
    how many may; ``grace_s`` is how recently used a session must be to stay open past the cap.
    """

    def __init__(
        self,
        runtime: Runtime,
        resolve_model: ModelResolver | None = None,
        *,
        limits: SessionLimits | None = None,
        grace_s: float = IDLE_GRACE_S,
    ) -> None:
        self.runtime = runtime
        self.sessions: dict[str, Session] = {}
        """The open sessions, by id."""
        self.runs: dict[str, RunHandle] = {}
        self.live = LiveRuns()
        self.limits = limits or SessionLimits()
        self._grace_s = grace_s
        self._held: dict[str, OpenSession] = {}
        self._leaving: dict[str, OpenSession] = {}
        """Sessions being closed: reopening one waits until its tools are disconnected."""
        self._headless: set[str] = set()
        """Closed sessions that were opened headless, so that reopening them keeps them so (the store has no field)."""
        self._wake = anyio.Event()
        self._resolve_model: ModelResolver = resolve_model or _resolve
        self._exit = contextlib.AsyncExitStack()
        self._tg: TaskGroup | None = None
        self._closing = anyio.Event()
        self._opening = anyio.Lock()
        self.interrupted: list[str] = []
        """Runs this host marked ``interrupted`` when it opened (a crash left them running)."""
        self.orchestrations = Orchestrations(self)
        """The orchestrations its sessions run (entered after the task group, so they stop before the sessions)."""
        self.goals = Goals(self)
        """The goals its sessions hold (entered like the orchestrations)."""
        self.remote: RemoteRuns | None = runtime.remote
        """The DBOS engine's queue and messages when workers drive this host's runs (None: it drives them itself)."""
        self.handoffs = Handoffs(self)
        """Sessions handing off to fresh ones (no run may start in one meanwhile), and the handoffs written."""

    async def __aenter__(self) -> Self:
        self._tg = await self._exit.enter_async_context(anyio.create_task_group())
        await self._exit.enter_async_context(self.orchestrations)
        await self._exit.enter_async_context(self.goals)
        self.runtime.face = self.face_server  # sessions opened from now on can start children through it
        self.interrupted = await self.runtime.mark_interrupted()
        if self.remote is not None:  # the workers' runs go on across a face's restart: follow them again
            await adopt_remote(self)
        self._tg.start_soon(self._close_idle_forever)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for session in self.sessions.values():
            session.stopping = "Loom stopped during this run (shutdown); its events up to then are kept"
        for handle in self.runs.values():
            handle.scope.cancel()
        self._closing.set()
        self._wake.set()
        for entry in self._held.values():
            entry.close.set()
        await self._exit.__aexit__(exc_type, exc, tb)

    # -- sessions ------------------------------------------------------------------------------------

    async def create_session(
        self,
        cwd: Path,
        model: Model,
        mode: str = "ask",
        *,
        headless: bool = False,
        notice: str = "",
        advisor: str | None = None,
        handoff: HandoffSeed | None = None,
    ) -> Session:
        """Open a new session; its tools stay connected until it is closed (idle, or the host closing).

        A ``headless`` session denies what policy would ask about, since nobody will answer. A ``notice`` is
        recorded as the session's first notice (what a user should know about it, such as the demo model).
        ``advisor`` is the session's own advisor mode (None: as configured). ``handoff``: it starts from another
        session's handoff (:mod:`orchestrator.runtime.handoff`).

        Raises:
            HostError: ``cwd`` is not a directory, or ``mode`` is unknown.
        """
        if mode not in MODES:
            raise HostError(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
        try:
            resolved = await anyio.to_thread.run_sync(_working_directory, cwd)  # one hand-off for both checks
        except OSError as exc:  # too long, no permission, a loop: the path cannot be used, and the reason says why
            raise HostError(f"cannot use {str(cwd)[:200]!r} as the working directory: {exc.strerror or exc}") from exc
        if resolved is None:
            shown = str(cwd) if len(str(cwd)) <= 200 else f"{str(cwd)[:100]}…{str(cwd)[-100:]}"
            raise HostError(f"{shown} is not a directory; pass an existing working directory")
        return await self._open(resolved, model, mode, None, headless, notice, advisor=advisor, handoff=handoff)

    async def open_child(self, model: Model, opening: ChildOpening, *, handoff: HandoffSeed | None = None) -> Session:
        """Open a new child session in its bounds' directory and mode (nobody to ask if its chain has nobody)."""
        bounds = opening.bounds
        return await self._open(
            Path(bounds.cwd), model, bounds.mode, None, bounds.deny_asks, child=opening, handoff=handoff
        )

    async def _open(
        self,
        cwd: Path,
        model: Model,
        mode: str,
        session_id: str | None,
        headless: bool = False,
        notice: str = "",
        child: ChildOpening | None = None,
        advisor: str | None = None,
        handoff: HandoffSeed | None = None,
    ) -> Session:
        assert self._tg is not None, "the host is not open"
        entry = OpenSession(session_id or "", anyio.current_time())
        failed: list[str] = []
        ready = anyio.Event()
        self._tg.start_soon(
            self._own_session, cwd, model, mode, (headless, notice, child, advisor, handoff), entry, failed, ready
        )
        await ready.wait()
        session = entry.session
        if session is None:
            raise HostError(f"could not open a session in {cwd}: {failed[0] if failed else 'see the Loom log'}")
        entry.session_id, entry.used = session.id, anyio.current_time()
        self.sessions[session.id] = session
        self._held[session.id] = entry
        if self._closing.is_set():
            entry.close.set()  # opened while the host was closing: it must not keep the host's task group open
        self._wake.set()  # one more open session: past the cap, the least recently used idle one goes
        return session

    async def _own_session(
        self,
        cwd: Path,
        model: Model,
        mode: str,
        how: tuple[bool, str, ChildOpening | None, str | None, HandoffSeed | None],
        entry: OpenSession,
        failed: list[str],
        ready: anyio.Event,
    ) -> None:
        try:
            headless, notice, child, advisor, handoff = how
            session_id = entry.session_id or None
            async with self.runtime.open_session(
                cwd,
                model,
                mode=mode,
                session_id=session_id,
                headless=headless,
                notice=notice,
                child=child,
                advisor=advisor,
                handoff=handoff,
            ) as session:
                entry.session = session
                ready.set()
                await entry.close.wait()
        except Exception as exc:  # a bad policy file or a store error fails this session, never the host
            if ready.is_set():
                # Its servers failed while closing: the session is gone either way; the host goes on.
                logger.warning("session %s closed with an error: %s", entry.session_id, exc, exc_info=True)
            else:
                failed.append(str(exc))
        finally:
            ready.set()
            entry.closed.set()

    async def session(self, session_id: str) -> Session:
        """An open session, reopening it from the store if this process has not opened it yet.

        Raises:
            HostError: no such session, or it is archived, or its directory or model is gone.
        """
        if session_id in self.sessions:
            self._touch(session_id)
            return self.sessions[session_id]
        record = await self.record(session_id)
        parent: Session | None = None
        if record.parent_session_id:
            # A child is bounded by its parent's bounds, so the parent is opened first (outside the lock: it is not
            # reentrant, and the parent may itself be a child).
            try:
                parent = await self.session(record.parent_session_id)
            except HostError as exc:
                raise HostError(
                    f"cannot reopen child session {session_id!r}: its parent cannot be used: {exc}"
                ) from exc
        async with self._opening:
            leaving = self._leaving.get(session_id)
            if leaving is not None:  # its tools are being disconnected; the store already has all of it
                with anyio.move_on_after(CLOSE_WAIT_S):
                    await leaving.closed.wait()
            if session_id in self.sessions:
                self._touch(session_id)
                return self.sessions[session_id]
            if record.archived:
                raise HostError(f"session {session_id!r} is archived; create a new session")
            if not await anyio.Path(record.cwd).is_dir():
                raise HostError(f"session {session_id!r} works in {record.cwd}, which no longer exists")
            try:
                model = self._resolve_model(record.model, Path(record.cwd))
            except ValueError as exc:
                raise HostError(f"cannot reopen session {session_id!r}: {exc}") from exc
            headless = session_id in self._headless
            child = None
            if parent is not None:
                child = await reopening(parent, record, self.runtime.log, self.runtime.home)
            session = await self._open(Path(record.cwd), model, record.mode, session_id, headless, child=child)
            self._headless.discard(session_id)
            return session

    # -- runs ----------------------------------------------------------------------------------------

    async def start_run(
        self, session_id: str, text: str, max_steps: int, *, timeout_s: float | None = None
    ) -> RunHandle:
        """Start a run in the background and return its handle at once.

        While another run of the session is in progress the new one is ``queued`` (recorded, so a crash
        loses no message) and starts when those ahead of it end. ``timeout_s`` is the run's own deadline, from
        when it starts: past it the run is cancelled and ends ``failed``.

        Raises:
            HostError: the session cannot be used.
        """
        self.handoffs.check(session_id)
        session = await self.session(session_id)
        assert self._tg is not None, "the host is not open"
        if self.remote is not None:  # the DBOS engine: a worker drives it; this handle follows it in the store
            handle = RunHandle(run_id=new_id("r"), session_id=session.id, status="queued", timeout_s=timeout_s)
            await self.remote.enqueue(session.id, handle.run_id, text, max_steps)
            self.runs[handle.run_id] = handle
            self.live.add(handle)
            self._tg.start_soon(self._follow_remote, session, handle)
            return handle
        ahead = self.live.of(session.id)
        handle = RunHandle(
            run_id=new_id("r"), session_id=session.id, status="queued" if ahead else "running", timeout_s=timeout_s
        )
        if ahead:
            queued = RunQueued(
                session_id=session.id, run_id=handle.run_id, text=text, max_steps=max_steps, owner=this_process()
            )
            await self.runtime.log.append(queued)
        self.runs[handle.run_id] = handle
        self.live.add(handle)
        self._tg.start_soon(self._drive, session, handle, text, max_steps, ahead)
        return handle

    async def _follow_remote(self, session: Session, handle: RunHandle) -> None:
        try:
            await follow_remote(session, handle, self.remote)
        finally:
            self.live.discard(handle)
            self._touch(session.id)
            self._wake.set()

    async def _drive(
        self,
        session: Session,
        handle: RunHandle,
        text: str | None,
        max_steps: int,
        ahead: list[RunHandle] | None = None,
        gate: anyio.Event | None = None,
    ) -> None:
        """Drive a new run answering ``text``, or (``text`` None) resume the interrupted run ``handle.run_id``."""
        relay = self.relay_for(session, handle, text)
        try:
            with handle.scope:
                if gate is not None:
                    await gate.wait()
                for other in ahead or ():
                    await other.done.wait()
                handle.status = "running"
                async with anyio.create_task_group() as aside:  # the run's deadline, and its parent's view of it
                    if handle.timeout_s is not None:
                        aside.start_soon(self.deadline, session, handle)
                    if relay is not None:
                        await relay.start()
                        aside.start_soon(relay.follow)
                    try:
                        if text is None:
                            handle.result = await session.resume(handle.run_id, headless=handle.headless)
                        else:
                            handle.result = await session.run(text, max_steps=max_steps, run_id=handle.run_id)
                    finally:
                        aside.cancel_scope.cancel()
            ending = session.endings.pop(handle.run_id, None)
            if handle.scope.cancelled_caught and session.stopping:
                handle.status = "interrupted"
            elif handle.scope.cancelled_caught and ending is not None:
                handle.status = ending[0]
                handle.result = RunResult(handle.run_id, ending[0], ending[1], "", 0)
            elif handle.scope.cancelled_caught:
                handle.status = "cancelled"
            elif handle.result is not None:
                ended = handle.result.status
                handle.status = (
                    "completed" if ended == "completed" else "needs_review" if ended == "needs_review" else "failed"
                )
        except ResumeError as exc:  # it changed between the check and the start; the store's record stands
            logger.warning("run %s was not resumed: %s", handle.run_id, exc)
            if self.runs.get(handle.run_id) is handle:
                del self.runs[handle.run_id]
        except Exception as exc:  # a store failure ends this run, never the host
            handle.status = "failed"
            handle.result = RunResult(handle.run_id, "failed", f"{type(exc).__name__}: {exc}", "", 0)
        finally:
            handle.done.set()
            self.live.discard(handle)
            self._touch(session.id)  # idle from now on, not from when the run started
            self._wake.set()
            self.end_children(session, handle)
            if relay is not None and not session.stopping:
                await self.relay_finish(relay)

    async def resume_run(
        self, run_id: str, *, headless: bool | None = None, gate: anyio.Event | None = None
    ) -> RunHandle:
        """Resume an ``interrupted`` or ``needs_review`` run under its own id, in the background.

        ``headless``: nobody will answer a review, so a call that needs one ends the run ``needs_review``
        with nothing run again (None: as the session was opened). ``gate``: the run is in progress at once (its
        handle says so) but goes on only when the event is set.

        Raises:
            HostError: no such run, it is not resumable (still going, finished, or not its session's
                latest run), or its session cannot be used or has another run in progress.
        """
        current = self.runs.get(run_id)
        if current is not None and not current.done.is_set():
            raise HostError(f"run {run_id!r} is in progress; only an interrupted run can be resumed")
        record = await self.runtime.log.store.get_run(run_id)
        if record is None:
            raise HostError(f"no run {run_id!r}; read_events or list_sessions show the existing ones")
        if self.remote is not None and record.status in (*RESUMABLE, "running", "queued"):
            raise HostError(refuse_resume(record))  # the workers resume the dbos engine's runs, never its face
        if record.status not in RESUMABLE:
            raise HostError(f"run {run_id!r} is {record.status}; only an interrupted run can be resumed")
        self.handoffs.check(record.session_id)
        session = await self.session(record.session_id)
        if self.live.of(session.id):
            raise HostError(f"session {session.id!r} has a run in progress; wait for it or cancel it first")
        events = await self.runtime.log.store.read_events(session.id, run_id=run_id)
        never_started = next((e for e in events if isinstance(e, RunQueued)), None)
        if any(isinstance(e, RunStarted) for e in events):
            never_started = None
        elif never_started is None:
            raise HostError(f"run {run_id!r} has no start in the store; it cannot be resumed")
        if never_started is None:
            try:
                find_resume_point(await self.runtime.log.store.read_events(session.id), run_id)
            except ResumeError as exc:
                raise HostError(str(exc)) from exc
        assert self._tg is not None, "the host is not open"
        # Again: the reads above may have taken long enough for an idle session to be closed meanwhile.
        session = await self.session(record.session_id)
        handle = RunHandle(run_id=run_id, session_id=session.id, headless=headless)
        self.runs[run_id] = handle
        self.live.add(handle)
        if never_started is not None:  # queued when Loom stopped: run the message from the beginning
            self._tg.start_soon(self._drive, session, handle, never_started.text, never_started.max_steps, None, gate)
        else:
            self._tg.start_soon(self._drive, session, handle, None, 0, None, gate)
        return handle

    async def resume_interrupted(self) -> list[str]:
        """Resume the runs marked interrupted when this host opened (``autoResume``); returns those started.

        A run that cannot be resumed (its session's directory is gone, say) is logged and left as it is. Parents'
        runs go first, so that a child's resumed run works for its parent's resumed run again (its events shown on
        the parent's stream, ended with it).
        """
        started: list[str] = []
        # Every run is in progress before any goes on: a parent resumed first must not see its child's run as the
        # store has it (interrupted, so ended) and stop waiting for it in the moment before the child's is resumed.
        gate = anyio.Event()
        try:
            for run_id in await self.parents_first(self.interrupted):
                try:
                    await self.resume_run(run_id, gate=gate)
                except HostError as exc:
                    logger.warning("not resuming run %s: %s", run_id, exc)
                    continue
                started.append(run_id)
        finally:
            gate.set()
        return started


def _working_directory(cwd: Path) -> Path | None:
    """``cwd`` resolved, or None when it is not a directory (blocking: call it in a worker thread).

    Raises:
        OSError: it cannot be used (too long, no permission, a loop of links).
    """
    return cwd.resolve() if cwd.is_dir() else None
