"""The store as a client of Loom's checkpoints MCP server.

The orchestrator keeps no durable state of its own: :class:`CheckpointStore` implements
:class:`~orchestrator.store.interface.Store` by calling the ``checkpoints`` server, in-process over the SDK's
in-memory transport by default (``Client(build_server(location))``), or any other MCP target. The location is a
SQLite file (a `Path`) or a Postgres database (a ``postgresql://`` URL, shared by several processes). It is its
own client, separate from the hub, so the server's tools never reach a model's tool list.

One ``append`` is one ``append_events`` call, whatever the batch size: the hot path (one append per
step) costs one MCP round trip and one database write. Events cross as JSON objects and come back
through :data:`~orchestrator.events.EVENT_ADAPTER`.

With the default in-process server, appends skip the round trip: the server tells the store the database its
connection opened (``build_server(on_open=...)``) and the store hands each batch to that database's ``append``,
the very call ``append_events`` makes, on the same connection, with the same numbering and the same errors. The
SDK's dispatch of an in-memory call (request and result models, tracing, argument validation) cost about five
times the SQLite write itself; every other call still goes through the server's tools.
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import anyio

from orchestrator.events import EVENT_ADAPTER, Event, ToolCallFinished
from orchestrator.store.interface import RunRecord, SessionRecord, SnapshotRecord, StoreError

if TYPE_CHECKING:
    from mcp import Client, StdioServerParameters
    from mcp.server.mcpserver import MCPServer

    from servers.checkpoints._server import StoreDatabase, StoreLocation

_TOOL_ERROR_PREFIX = "Error executing tool "


class CheckpointStore:
    """:class:`~orchestrator.store.interface.Store` backed by the checkpoints server, for a single writing process."""

    def __init__(
        self, path: StoreLocation, *, read_only: bool = False, target: MCPServer | StdioServerParameters | None = None
    ) -> None:
        """A store over the SQLite file or the Postgres database at ``path``; open it with ``async with``.

        Args:
            path: the database file (a `Path`), or a ``postgresql://`` (or ``postgres://``) URL; created and
                migrated unless ``read_only``.
            read_only: reads work, appends fail with a StoreError.
            target: where the checkpoints server runs; by default an in-process server on ``path``.
        """
        from servers.checkpoints._pg_errors import is_postgres_url, mask_url

        self.location = path
        """Where the store is, as given (a URL keeps its password: never show it, show `path`)."""
        self.path: Path | str = mask_url(path) if isinstance(path, str) and is_postgres_url(path) else path
        """What messages name: the file, or the URL with its password masked."""
        self._read_only = read_only
        self._target = target
        self._client: Client | None = None
        self._stack: contextlib.AsyncExitStack | None = None
        self._db: StoreDatabase | None = None
        """The in-process server's open database, which appends go to directly; None for any other target."""

    async def __aenter__(self) -> Self:
        from mcp import Client

        target = self._target
        if target is None:
            from servers.checkpoints import build_server

            target = build_server(self.location, read_only=self._read_only, on_open=self._opened)
        stack = contextlib.AsyncExitStack()
        try:
            self._client = await stack.enter_async_context(Client(target))
            self._stack = stack
            await self._call("status", {})  # a database that could not be opened says why here
        except BaseException as exc:
            self._client, self._stack = None, None
            # Not under a shielding scope: the client's task group must be left as the innermost scope.
            await stack.aclose()
            if isinstance(exc, Exception) and not isinstance(exc, StoreError):
                raise StoreError(f"cannot start the checkpoint store for {self.path}: {exc}") from exc
            raise
        return self

    def _opened(self, db: StoreDatabase | None) -> None:
        self._db = db

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Disconnect (closing the in-process server's database); safe to call twice."""
        if self._stack is not None:
            stack, self._stack, self._client = self._stack, None, None
            await stack.aclose()  # in the task that opened it: the client's task group lives there

    async def _call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if self._client is None:
            raise StoreError("the store is not open")
        from mcp import MCPError

        try:
            result = await self._client.call_tool(tool, arguments)
        except MCPError as exc:
            raise StoreError(f"the checkpoint store at {self.path} failed ({tool}): {exc}") from exc
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            # a checkpoints server in a subprocess that died: the store is gone, not a bug here
            raise StoreError(f"lost the checkpoint server for {self.path} ({tool}): {exc!r}") from exc
        if result.is_error:
            text = " ".join(getattr(block, "text", "") for block in result.content)
            if text.startswith(_TOOL_ERROR_PREFIX):  # "Error executing tool NAME: message" -> "message"
                text = text.split(": ", 1)[-1]
            raise StoreError(text or f"the checkpoint store at {self.path} failed ({tool})")
        if result.structured_content is None:
            raise StoreError(f"the checkpoint store at {self.path} answered {tool} without a result")
        return dict(result.structured_content)

    async def append(self, events: Sequence[Event]) -> None:
        """See :meth:`orchestrator.store.interface.Store.append`."""
        if not events:
            return
        if any(event.type == "text_delta" for event in events):
            raise ValueError("live-only events are not stored")
        # ``seq`` is the server's to assign; leaving it out keeps the payload to what it stores.
        payload = [event.model_dump(mode="json", exclude={"seq"}) for event in events]
        if self._db is not None and self._client is not None:
            seqs = await self._append_directly(self._db, payload)
        else:
            seqs = (await self._call("append_events", {"events": payload}))["seqs"]
        for event, seq in zip(events, seqs, strict=True):
            event.seq = seq

    async def _append_directly(self, db: StoreDatabase, payload: list[dict[str, Any]]) -> list[int]:
        """``append_events`` without the round trip: what its tool does, errors worded as its result would be."""
        from servers.checkpoints._db import DatabaseError

        try:
            return await db.append(payload)
        except (DatabaseError, ValueError) as exc:
            raise StoreError(str(exc)) from exc
        except Exception as exc:  # what the tool would report as its failure
            raise StoreError(f"the checkpoint store at {self.path} failed (append_events): {exc}") from exc

    async def read_events(
        self,
        session_id: str,
        *,
        after_seq: int = 0,
        run_id: str | None = None,
        limit: int | None = None,
        before_seq: int | None = None,
    ) -> list[Event]:
        """See :meth:`orchestrator.store.interface.Store.read_events`."""
        arguments: dict[str, Any] = {"session_id": session_id, "after_seq": after_seq}
        if run_id is not None:
            arguments["run_id"] = run_id
        if limit is not None:
            arguments["limit"] = limit
        if before_seq is not None:
            arguments["before_seq"] = before_seq
        found = await self._call("read_events", arguments)
        return [EVENT_ADAPTER.validate_json(text) for text in found["events"]]

    async def read_context_events(self, session_id: str) -> list[Event]:
        """See :meth:`orchestrator.store.interface.Store.read_context_events`."""
        found = await self._call("read_context", {"session_id": session_id})
        return [EVENT_ADAPTER.validate_json(text) for text in found["events"]]

    async def find_tool_result(self, session_id: str, call_id: str) -> ToolCallFinished | None:
        """See :meth:`orchestrator.store.interface.Store.find_tool_result`.

        Raises:
            StoreError: the store failed, or answered with an event that is not a finished tool call.
        """
        text = (await self._call("find_tool_result", {"session_id": session_id, "call_id": call_id}))["event"]
        if text is None:
            return None
        event = EVENT_ADAPTER.validate_json(text)
        if not isinstance(event, ToolCallFinished):
            raise StoreError(f"the checkpoint store at {self.path} answered find_tool_result with a {event.type} event")
        return event

    async def get_session(self, session_id: str) -> SessionRecord | None:
        """See :meth:`orchestrator.store.interface.Store.get_session`."""
        found = (await self._call("get_session", {"session_id": session_id}))["session"]
        return None if found is None else SessionRecord.model_validate(found)

    async def list_sessions(self, *, include_archived: bool = False, limit: int = 100) -> list[SessionRecord]:
        """See :meth:`orchestrator.store.interface.Store.list_sessions`."""
        found = await self._call("list_sessions", {"include_archived": include_archived, "limit": limit})
        return [SessionRecord.model_validate(row) for row in found["sessions"]]

    async def set_session_title(self, session_id: str, title: str) -> bool:
        """See :meth:`orchestrator.store.interface.Store.set_session_title`."""
        return bool((await self._call("set_session_title", {"session_id": session_id, "title": title}))["found"])

    async def get_run(self, run_id: str) -> RunRecord | None:
        """See :meth:`orchestrator.store.interface.Store.get_run`."""
        return _run((await self._call("get_run", {"run_id": run_id}))["run"])

    async def find_run(self, prefix: str) -> RunRecord | None:
        """The run whose id starts with ``prefix``, if exactly one does (for CLI convenience)."""
        if not prefix:
            return None
        return _run((await self._call("find_run", {"prefix": prefix}))["run"])

    async def list_runs_with_status(self, status: str) -> list[RunRecord]:
        """See :meth:`orchestrator.store.interface.Store.list_runs_with_status`."""
        found = await self._call("list_runs_with_status", {"status": status})
        return [RunRecord.model_validate(row) for row in found["runs"]]

    async def list_runs(self, session_id: str | None = None, limit: int = 50) -> list[RunRecord]:
        """See :meth:`orchestrator.store.interface.Store.list_runs`."""
        arguments: dict[str, Any] = {"limit": limit}
        if session_id is not None:
            arguments["session_id"] = session_id
        found = await self._call("list_runs", arguments)
        return [RunRecord.model_validate(row) for row in found["runs"]]

    async def snapshot_file(self, session_id: str, checkpoint: str, path: str, content: bytes | None) -> bool:
        """See :meth:`orchestrator.store.interface.Store.snapshot_file`."""
        encoded = None if content is None else base64.b64encode(content).decode("ascii")
        arguments = {"session_id": session_id, "checkpoint": checkpoint, "path": path, "content_b64": encoded}
        return bool((await self._call("snapshot_file", arguments))["recorded"])

    async def list_snapshots(self, session_id: str) -> list[SnapshotRecord]:
        """See :meth:`orchestrator.store.interface.Store.list_snapshots`."""
        found = await self._call("list_snapshots", {"session_id": session_id})
        return [SnapshotRecord.model_validate(row) for row in found["snapshots"]]

    async def read_snapshot(self, session_id: str, checkpoint: str, path: str) -> tuple[bool, bytes | None] | None:
        """See :meth:`orchestrator.store.interface.Store.read_snapshot`."""
        arguments = {"session_id": session_id, "checkpoint": checkpoint, "path": path}
        found = await self._call("read_snapshot", arguments)
        if not found["found"]:
            return None
        encoded = found.get("content_b64")
        return bool(found["existed"]), None if encoded is None else base64.b64decode(encoded)


def _run(found: dict[str, Any] | None) -> RunRecord | None:
    return None if found is None else RunRecord.model_validate(found)
