"""What the host's long-running controllers share: a task group the host enters, and one client of Loom's face.

Orchestrations (:mod:`orchestrator.runtime.orchestrations`) and goals (:mod:`orchestrator.runtime.goals`) each drive
their controllers in tasks of their own group, so a tool call that starts one answers at once, and start their
children through Loom's own face, in-process, with one client held for the life of the host. Closing stops them
where their events left them: every step is already in the store, so a restart resumes from there.
"""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import anyio
from anyio.abc import TaskGroup, TaskStatus

if TYPE_CHECKING:
    from clients.loom import LoomClient
    from orchestrator.runtime.host import SessionHost

__all__ = ["FaceDriven"]


class FaceDriven:
    """A task group entered with the host and a face client opened on first use, both closed with the host.

    Args:
        host: The session host whose face starts the children.
        what: What the subclass drives, for the error when it is used closed ("orchestrations", "goals").
    """

    def __init__(self, host: SessionHost, what: str) -> None:
        self.host = host
        self._what = what
        self._tg: TaskGroup | None = None
        self._client: LoomClient | None = None
        self._connecting = anyio.Lock()

    async def __aenter__(self) -> Self:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        # Stopped, not ended: every step is already in the store, so a restart resumes from there.
        assert self._tg is not None
        self._tg.cancel_scope.cancel()
        try:
            return await self._tg.__aexit__(kind, exc, tb)
        finally:
            self._tg, self._client = None, None

    @property
    def task_group(self) -> TaskGroup:
        """The group the controllers run in (only while open)."""
        assert self._tg is not None, f"the host's {self._what} are not open"
        return self._tg

    async def _face_client(self) -> LoomClient:
        async with self._connecting:
            if self._client is None:
                await self.task_group.start(self._hold_client)
            assert self._client is not None
            return self._client

    async def _hold_client(self, *, task_status: TaskStatus[Any]) -> None:
        """One client of the face for every controller, open (in this task, as its task groups need) until the end."""
        from servers.subagents import in_process

        async with in_process(self.host.face_server)() as client:
            self._client = client
            task_status.started()
            await anyio.sleep_forever()
