"""The session host: long-lived sessions whose runs go on in the background.

The MCP face (:mod:`orchestrator.face`) drives this; nothing here knows about MCP. Each session's
tools stay connected until the host closes; each run is a task in the host's task group with its own
cancel scope, so a call that starts a run returns at once and another call can cancel it.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Self

import anyio
from anyio.abc import TaskGroup

from orchestrator.events import RunStatus
from orchestrator.models.base import Model
from orchestrator.runtime import RunResult, Runtime, Session, new_id


class HostError(Exception):
    """A request the host cannot serve (unknown id, bad directory); the message says what to do."""


@dataclass
class RunHandle:
    """A run as the host tracks it."""

    run_id: str
    session_id: str
    status: RunStatus = "running"
    result: RunResult | None = None
    done: anyio.Event = field(default_factory=anyio.Event)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)


class SessionHost:
    """Owns sessions and their background runs for the life of one runtime."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.sessions: dict[str, Session] = {}
        self.runs: dict[str, RunHandle] = {}
        self._exit = contextlib.AsyncExitStack()
        self._tg: TaskGroup | None = None
        self._closing = anyio.Event()

    async def __aenter__(self) -> Self:
        self._tg = await self._exit.enter_async_context(anyio.create_task_group())
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for handle in self.runs.values():
            handle.scope.cancel()
        self._closing.set()
        await self._exit.__aexit__(exc_type, exc, tb)

    async def create_session(self, cwd: Path, model: Model) -> Session:
        """Open a session whose tools stay connected until the host closes.

        Raises:
            HostError: ``cwd`` is not a directory.
        """
        path = anyio.Path(cwd)
        if not await path.is_dir():
            raise HostError(f"{cwd} is not a directory; pass an existing working directory")
        resolved = Path(await path.resolve())
        assert self._tg is not None, "the host is not open"
        # The session's hub holds task groups, which must be entered and left in one task: a task
        # owned by the host, not the request that asked for the session.
        opened: list[Session] = []
        ready = anyio.Event()
        self._tg.start_soon(self._own_session, resolved, model, opened, ready)
        await ready.wait()
        if not opened:
            raise HostError(f"could not open a session in {cwd}; see the Loom log")
        self.sessions[opened[0].id] = opened[0]
        return opened[0]

    async def _own_session(self, cwd: Path, model: Model, opened: list[Session], ready: anyio.Event) -> None:
        try:
            async with self.runtime.open_session(cwd, model) as session:
                opened.append(session)
                ready.set()
                await self._closing.wait()
        finally:
            ready.set()

    def session(self, session_id: str) -> Session:
        """Look a session up.

        Raises:
            HostError: no such session.
        """
        try:
            return self.sessions[session_id]
        except KeyError:
            raise HostError(f"no session {session_id!r}; create_session makes one") from None

    def run(self, run_id: str) -> RunHandle:
        """Look a run up.

        Raises:
            HostError: no such run.
        """
        try:
            return self.runs[run_id]
        except KeyError:
            raise HostError(f"no run {run_id!r} in this runtime") from None

    def start_run(self, session_id: str, text: str, max_steps: int) -> RunHandle:
        """Start a run in the background and return its handle at once."""
        session = self.session(session_id)
        assert self._tg is not None, "the host is not open"
        handle = RunHandle(run_id=new_id("r"), session_id=session.id)
        self.runs[handle.run_id] = handle
        self._tg.start_soon(self._drive, session, handle, text, max_steps)
        return handle

    async def _drive(self, session: Session, handle: RunHandle, text: str, max_steps: int) -> None:
        try:
            with handle.scope:
                handle.result = await session.run(text, max_steps=max_steps, run_id=handle.run_id)
                handle.status = "completed" if handle.result.status == "completed" else "failed"
            if handle.scope.cancelled_caught:
                handle.status = "cancelled"
        except Exception as exc:  # a store failure ends this run, never the host
            handle.status = "failed"
            handle.result = RunResult(handle.run_id, "failed", f"{type(exc).__name__}: {exc}", "", 0)
        finally:
            handle.done.set()

    async def wait(self, handle: RunHandle, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` for a run to end."""
        with anyio.move_on_after(timeout_s):
            await handle.done.wait()
