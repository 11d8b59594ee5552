"""Handing a session off to a fresh one, and promoting a session's notes to its project.

A handoff ends a session on purpose. The idle session writes its handoff with its own model, outside its
conversation, as a compaction summary is written (:mod:`orchestrator.context.handoff`: fixed blocks, the user's
instructions verbatim, checked, retried once). Then a fresh session is opened with the same working directory,
mode, model, advisor and rules (a child of the same parent, with the same bounds, for a child), starting from the
handoff: its first model request carries it and the user's instructions, whenever its first message is sent, and a
reopened fresh session rebuilds the same history (:func:`orchestrator.context.history.handoff_text`). The old
session is archived: hidden from lists, its events untouched and readable.

Why a crash leaves no half state: nothing is stored until the handoff has passed its checks; then ONE batch of
events, in one store transaction, holds all of it: the fresh session's ``session_created`` (``handoff_from`` set),
its copy of the handoff (``handoff_written`` with ``from_session_id``, which its history starts from), and, in the
old session, ``handoff_written`` (naming the fresh one) and ``session_archived``. Either all of it is stored or none
is. Promoting the notes comes after, in the memory database (another file, so not in that transaction): a crash
before it leaves the handoff done and the notes in the session, and ``archive_memory`` (``loom memory archive``)
promotes them later; promoting is idempotent, so running it twice changes nothing.

While a handoff is being written no run may start in the session (:meth:`Handoffs.check`, asked by the host's
``start_run`` and ``resume_run``), and one with a run in progress is refused rather than waited for.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import anyio.to_thread

from orchestrator.context.handoff import HandoffFailed, handoff_source, write_handoff
from orchestrator.context.instructions import project_root
from orchestrator.events import Event, SessionArchived, SessionCreated
from orchestrator.events_long import HandoffTrigger, HandoffWritten, MemoryArchived
from orchestrator.home import MEMORY_DB_NAME
from orchestrator.loop.steps import complete
from orchestrator.models.retry import RetryingModel, RetryPolicy
from orchestrator.protocol_long import HandoffReport, MemoryArchiveInfo
from orchestrator.runtime.host_runs import HostError

if TYPE_CHECKING:
    from orchestrator.runtime.host import SessionHost
    from orchestrator.runtime.session import Session
    from orchestrator.store.interface import SessionRecord

__all__ = ["HandoffError", "HandoffSeed", "Handoffs"]

logger = logging.getLogger(__name__)


class HandoffError(HostError):
    """A handoff was refused or failed (busy session, model failure, checks failed); nothing was changed."""


@dataclass(frozen=True, slots=True)
class HandoffSeed:
    """What opens a session started from a handoff (see :meth:`orchestrator.runtime.runtime.Runtime.open_session`).

    Attributes:
        from_session_id: The session handed off (the new one's ``session_created.handoff_from``).
        events: Given the new session's id, the events stored in the batch that creates it: its copy of the
            handoff, and the old session's ``handoff_written`` and ``session_archived``.
    """

    from_session_id: str
    events: Callable[[str], list[Event]]


class Handoffs:
    """A host's handoffs: writing them, reading them back, and promoting sessions' notes."""

    def __init__(self, host: SessionHost) -> None:
        self.host = host
        self._going: set[str] = set()
        self._done: dict[str, str] = {}
        """Sessions this process handed off -> the fresh session: they may still be open, but take no runs."""

    def check(self, session_id: str) -> None:
        """Refuse (HostError) a run in a session being handed off, or handed off by this process."""
        if session_id in self._going:
            raise HostError(
                f"session {session_id!r} is being handed off to a fresh session; get_handoff names it once it exists"
            )
        if session_id in self._done:
            raise HostError(
                f"session {session_id!r} was handed off to session {self._done[session_id]!r}; continue there"
            )

    async def handoff(
        self,
        session_id: str,
        instructions: str = "",
        *,
        trigger: HandoffTrigger = "manual",
        keep_memory: bool = False,
    ) -> HandoffReport:
        """Write ``session_id``'s handoff, start the fresh session from it, archive the old one.

        Args:
            session_id: An idle, unarchived session.
            instructions: What the person asks of the fresh session besides; carried to it verbatim.
            trigger: ``manual``, or ``goal`` (a goal's controller, past the watermark).
            keep_memory: Leave the session's notes in its own namespace (default: promote them to the project).

        Raises:
            HostError: no such session, archived, busy (a run going, or a handoff already), the model failed or its
                handoff failed the checks twice (HandoffError), or the fresh session could not be opened. In every
                case nothing was stored.
        """
        host = self.host
        record = await host.record(session_id)
        if record.archived:
            written = await self._outgoing(session_id)
            if written is not None:
                raise HandoffError(f"session {session_id!r} was already handed off to {written.to_session_id!r}")
            raise HandoffError(f"session {session_id!r} is archived; only a session in use can be handed off")
        if session_id in self._going:
            raise HandoffError(f"session {session_id!r} is already being handed off")
        self._busy_check(session_id)
        self._going.add(session_id)
        try:
            session = await host.session(session_id)
            self._busy_check(session_id, session)
            events = await host.runtime.log.store.read_events(session_id)
            source = handoff_source(events)
            model = RetryingModel(session.model, RetryPolicy())
            try:
                text, attempts = await write_handoff(
                    source, lambda request: complete(model, request), extra=instructions
                )
            except HandoffFailed as exc:
                raise HandoffError(f"no handoff was written, session {session_id!r} is as it was: {exc}") from exc
            self._busy_check(session_id, session)  # a run that slipped in meanwhile would be lost to the handoff
            written = HandoffWritten(
                session_id=session_id,
                to_session_id="",
                text=text,
                instructions=source.instructions,
                trigger=trigger,
                extra=instructions,
                attempts=attempts,
            )

            def seed(new_id: str) -> list[Event]:
                opening = written.model_copy(
                    update={"session_id": new_id, "to_session_id": new_id, "from_session_id": session_id}
                )
                outgoing = written.model_copy(update={"to_session_id": new_id})
                return [opening, outgoing, SessionArchived(session_id=session_id)]

            try:
                fresh_id = (await self._open_fresh(session, record, events, HandoffSeed(session_id, seed))).id
            except HostError:
                # Stored, then its tools failed to connect: the handoff stands (the store says so), and the fresh
                # session opens again when it is next used. Not stored: nothing changed, and the refusal says why.
                stored = await self._outgoing(session_id)
                if stored is None:
                    raise
                fresh_id = stored.to_session_id
            self._done[session_id] = fresh_id
        finally:
            self._going.discard(session_id)
        if record.title:
            await host.runtime.log.store.set_session_title(fresh_id, record.title)
        report = HandoffReport(
            session_id=session_id,
            new_session_id=fresh_id,
            text=text,
            instructions=source.instructions,
            extra=instructions,
            trigger=trigger,
            attempts=attempts,
        )
        if not keep_memory:
            try:
                report.memory = await self.archive_memory(session_id)
            except Exception as exc:  # the handoff stands; the notes stay in the session, to be promoted later
                logger.warning("session %s: handed off, its notes not promoted: %s", session_id, exc)
                report.memory_error = str(exc)
        return report

    def _busy_check(self, session_id: str, session: Session | None = None) -> None:
        if self.host.live.of(session_id) or (session is not None and (session.busy or session.approvals.pending)):
            raise HandoffError(
                f"session {session_id!r} is busy (a run, a compaction or an approval is in progress); wait for it to "
                "end or cancel it, then hand off"
            )

    async def _open_fresh(
        self, session: Session, record: SessionRecord, events: list[Event], seed: HandoffSeed
    ) -> Session:
        """Open the fresh session as the old one was opened: same directory, mode, model, advisor, rules, parent."""
        from orchestrator.runtime.children import reopening
        from orchestrator.runtime.runtime import ChildOpening

        host = self.host
        created = events[0] if events and isinstance(events[0], SessionCreated) else None
        advisor = (created.advisor if created is not None else "") or None
        if not record.parent_session_id:
            return await host.create_session(
                Path(record.cwd),
                session.model,
                record.mode,
                headless=session.approvals.headless,
                advisor=advisor,
                handoff=seed,
            )
        parent = await host.session(record.parent_session_id)
        again = await reopening(parent, record, host.runtime.log, host.runtime.home)
        opening = ChildOpening(again.bounds, again.lineage, created.request if created is not None else None)
        return await host.open_child(session.model, opening, handoff=seed)

    async def _outgoing(self, session_id: str) -> HandoffWritten | None:
        events = await self.host.runtime.log.store.read_events(session_id)
        return _handoffs(events)[0]

    async def get(self, session_id: str) -> HandoffReport:
        """The handoff ``session_id`` wrote (the old id) or, failing that, the one it started from (the new id).

        Raises:
            HostError: no such session, or it neither wrote a handoff nor started from one.
        """
        await self.host.record(session_id)
        events = await self.host.runtime.log.store.read_events(session_id)
        outgoing, incoming = _handoffs(events)
        found = outgoing or incoming
        if found is None:
            raise HostError(f"session {session_id!r} has no handoff; handoff_session writes one")
        old = found.session_id if found is outgoing else found.from_session_id
        return HandoffReport(
            session_id=old,
            new_session_id=found.to_session_id,
            text=found.text,
            instructions=found.instructions,
            extra=found.extra,
            trigger=found.trigger,
            attempts=found.attempts,
            archived=True,
        )

    async def archive_memory(self, session_id: str) -> MemoryArchiveInfo:
        """Promote the notes ``session_id`` saved in its session namespace to its project's namespace.

        Done through the memory server's own ``archive`` tool, on a server scoped to that session and its project
        (so nothing of another session can be reached). Copies, never overwriting a project note (see
        :meth:`servers.memory._db.Database.archive`); a ``memory_archived`` event in the session says what moved,
        when anything did. Works on archived sessions too.

        Raises:
            HostError: no such session, or the memory database refused.
        """
        from mcp import Client, MCPError

        from servers import memory

        record = await self.host.record(session_id)
        try:
            project = await anyio.to_thread.run_sync(project_root, Path(record.cwd))
            database = self.host.runtime.home / MEMORY_DB_NAME
            async with Client(memory.build_server(database, project=str(project), session=session_id)) as client:
                answer = await client.call_tool("archive", {})
        except (OSError, MCPError) as exc:
            raise HostError(f"the session's notes were not promoted: {exc}") from exc
        if answer.is_error or answer.structured_content is None:
            text = " ".join(getattr(b, "text", "") for b in answer.content).strip()
            raise HostError(f"the session's notes were not promoted: {text or 'the memory server failed'}")
        info = MemoryArchiveInfo.model_validate({**answer.structured_content, "session_id": session_id})
        if info.keys or info.skipped:
            await self.host.runtime.log.append(
                MemoryArchived(
                    session_id=session_id,
                    from_namespace=info.from_namespace,
                    to_namespace=info.to_namespace,
                    keys=info.keys,
                    renamed=info.renamed,
                    unchanged=info.unchanged,
                    skipped=info.skipped,
                )
            )
        return info


def _handoffs(events: list[Event]) -> tuple[HandoffWritten | None, HandoffWritten | None]:
    """The handoff a session wrote, and the one it started from (None where there is none)."""
    outgoing: HandoffWritten | None = None
    incoming: HandoffWritten | None = None
    for event in events:
        if isinstance(event, HandoffWritten):
            if event.from_session_id:
                incoming = incoming or event
            else:
                outgoing = event
    return outgoing, incoming
