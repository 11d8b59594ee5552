"""Assembly of the checkpoints server: its tools, their result models, and the stdio entry point.

The store is a SQLite file (a `Path`) or a Postgres database (a ``postgresql://`` URL); both backends have the
same methods, results and errors, so the tools do not know which they serve. The database is opened in the
server's lifespan, once per connection. A database that cannot be opened does not stop the server: every tool
then answers with the reason, so that a client over any transport (in-process or stdio) gets a message it can
show, not a dropped connection.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeAlias

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field, WithJsonSchema

from servers._database import Opened, default_database
from servers._stdio import serve_stdio
from servers._version import loom_version
from servers.checkpoints._db import SCHEMA_VERSION, Database, DatabaseError
from servers.checkpoints._pg_errors import is_postgres_url, mask_url
from servers.checkpoints._schema import MAX_INT

if TYPE_CHECKING:
    from servers.checkpoints._pg import PostgresDatabase

__all__ = ["StoreDatabase", "StoreLocation", "build_server", "main", "open_database"]

StoreLocation: TypeAlias = "Path | str"
"""Where a store is: a SQLite file, or a Postgres database's ``postgresql://`` (or ``postgres://``) URL."""

StoreDatabase: TypeAlias = "Database | PostgresDatabase"
"""An open store of either backend: the same methods, results and errors."""

_READ = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
_WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)


_TEXTS_SCHEMA: dict[str, Any] = {
    "type": "array",
    "description": "each element one stored event's JSON text (a string), oldest first",
}


class StoreInfo(BaseModel):
    """Which database the server has open."""

    path: str
    schema_version: int
    read_only: bool


class Events(BaseModel):
    """Stored events, oldest first: each the JSON text of the object that was appended plus its ``seq``."""

    # Text, not objects: the store hands back what it stored without parsing it, and the client parses
    # each event straight into its own model. Objects cost a parse here, a serialisation into the result,
    # and a generic parse and walk on the client: reading a 3,000-event session took 0.42 s, text 0.1 s.
    # The schema leaves out ``items``: the SDK's client checks every result against the declared schema
    # with jsonschema, which walks an array's items one by one; for ``{"type": "string"}`` items that walk
    # was 35-42% of reading a context of 500 to 3,000 events (the client's parse of each event checks them anyway).
    events: Annotated[list[str], WithJsonSchema(_TEXTS_SCHEMA)]


class ToolResult(BaseModel):
    """One stored ``tool_call_finished`` event as its JSON text (like `Events`), or null."""

    event: str | None


class SessionInfo(BaseModel):
    """A session as the store indexes it."""

    id: str
    created: float
    cwd: str
    model: str
    mode: str
    archived: bool
    context_used: int | None = None
    """Tokens in use at the session's last context watermark (null until one is stored)."""
    context_window: int | None = None
    """The context window of the session's model, from its last watermark or model switch (null until known)."""
    last_seq: int
    title: str = ""
    """A person's name for the session (empty until ``set_session_title``)."""
    last_run_status: str | None = None
    """The status of the session's newest run (null: it has none)."""
    last_run_owner: str = ""
    """The process recorded as driving that run (``PID:STARTTIME``)."""
    parent_session_id: str = ""
    """For a child session: the session that started it (empty for a top-level one)."""
    parent_run_id: str = ""
    """The parent's run that started it."""
    agent: str = ""
    """The agent definition the child runs as (empty: none)."""


class RunInfo(BaseModel):
    """A run as the store indexes it."""

    id: str
    session_id: str
    started: float
    finished: float | None
    status: str
    reason: str
    final_text: str
    model: str
    owner: str


class SessionLookup(BaseModel):
    """One session, or null."""

    session: SessionInfo | None


class Sessions(BaseModel):
    """Sessions, newest first."""

    sessions: list[SessionInfo]


class RunLookup(BaseModel):
    """One run, or null."""

    run: RunInfo | None


class Runs(BaseModel):
    """Runs, in the order the tool describes."""

    runs: list[RunInfo]


class Snapshotted(BaseModel):
    """Whether the snapshot was recorded (false: that checkpoint already had this file)."""

    recorded: bool


class SnapshotInfo(BaseModel):
    """One file snapshot, without its content."""

    checkpoint: str
    path: str
    existed: bool
    size: int
    ts: float


class Snapshots(BaseModel):
    """File snapshots, oldest first."""

    snapshots: list[SnapshotInfo]


class SnapshotContent(BaseModel):
    """A snapshot's content; ``content_b64`` is null when the file did not exist at the checkpoint."""

    found: bool
    existed: bool = False
    content_b64: str | None = None


async def open_database(location: StoreLocation, *, read_only: bool = False) -> StoreDatabase:
    """Open the store at ``location``: a `Path` (or a string without a scheme) is SQLite, a Postgres URL Postgres.

    Raises:
        DatabaseError: it cannot be opened (the message says what to do, without the URL's password), or
            ``location`` is a URL of another kind.
    """
    if isinstance(location, str):
        if is_postgres_url(location):
            from servers.checkpoints._pg import PostgresDatabase  # psycopg only when a store is on Postgres

            return await PostgresDatabase.open(location, read_only=read_only)
        if "://" in location:
            raise DatabaseError(
                f"{mask_url(location)} is not a store Loom can open: give a file path (SQLite) or a "
                "postgresql://USER@HOST:PORT/DATABASE URL (Postgres)"
            )
        location = Path(location)
    return await Database.open(location, read_only=read_only)


def _db(ctx: Context) -> StoreDatabase:
    opened: Opened[StoreDatabase] = ctx.request_context.lifespan_context["opened"]
    return opened.require()


@contextmanager
def _reported() -> Iterator[None]:
    """Turn database failures into tool errors whose text the client shows as is."""
    try:
        yield
    except (DatabaseError, ValueError) as exc:
        raise ToolError(str(exc)) from exc


async def status(ctx: Context) -> StoreInfo:
    """The open database: path, schema version, read-only or not (fails with the reason it could not open)."""
    db = _db(ctx)
    with _reported():
        return StoreInfo(path=str(db.path), schema_version=await db.schema_version(), read_only=db.read_only)


async def append_events(
    ctx: Context,
    events: Annotated[
        list[dict[str, Any]], Field(description="event objects, each with session_id, type, ts (and run_id if any)")
    ],
) -> CallToolResult:
    """Store a batch of events atomically (all or nothing) and number them per session.

    Returns ``{"seqs": [...]}``: the ``seq`` given to each event, in the order they were sent.
    session_created, session_archived, run_queued, run_started, run_resumed and run_finished events
    also update the session and run index; context_watermark and model_switched events update the
    session's model and context fields.
    """
    db = _db(ctx)
    with _reported():
        seqs = await db.append(events)
    # This is the hot path (one call per loop step), so it builds its result by hand: with a
    # declared output schema every client re-validates the result against it with jsonschema,
    # which costs more per call than SQLite's insert. Same shape as `Appended`.
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(seqs))], structured_content={"seqs": seqs})


async def read_events(
    ctx: Context,
    session_id: str,
    after_seq: Annotated[int, Field(ge=0, le=MAX_INT, description="only events with a greater seq")] = 0,
    run_id: Annotated[str | None, Field(description="only this run's events")] = None,
    limit: Annotated[int | None, Field(ge=1, le=MAX_INT)] = None,
    before_seq: Annotated[
        int | None, Field(ge=1, le=MAX_INT, description="only events with a smaller seq; limit then keeps the newest")
    ] = None,
) -> Events:
    """A session's events after a cursor, oldest first (with ``before_seq``: the newest ``limit`` before it)."""
    db = _db(ctx)
    with _reported():
        bodies = await db.read_events(
            session_id, after_seq=after_seq, run_id=run_id, limit=limit, before_seq=before_seq
        )
    return Events(events=bodies)


async def read_context(ctx: Context, session_id: str) -> Events:
    """The events a model context is rebuilt from, oldest first.

    The latest compaction and everything from the first event it kept, or the whole session if it was never
    compacted.
    """
    db = _db(ctx)
    with _reported():
        return Events(events=await db.read_context(session_id))


async def find_tool_result(
    ctx: Context, session_id: str, call_id: Annotated[str, Field(description="the tool call's id")]
) -> ToolResult:
    """The session's latest ``tool_call_finished`` event for ``call_id`` (a resume may finish a call twice), or null."""
    db = _db(ctx)
    with _reported():
        return ToolResult(event=await db.find_tool_result(session_id, call_id))


async def get_session(ctx: Context, session_id: str) -> SessionLookup:
    """One session, or null."""
    db = _db(ctx)
    with _reported():
        rows = await db.sessions("WHERE id=?", (session_id,))
    return SessionLookup(session=SessionInfo(**rows[0]) if rows else None)


async def list_sessions(
    ctx: Context, include_archived: bool = False, limit: Annotated[int, Field(ge=1)] = 100
) -> Sessions:
    """Sessions, newest first."""
    db = _db(ctx)
    where = "" if include_archived else "WHERE archived=0 "
    with _reported():
        rows = await db.sessions(where + "ORDER BY created DESC LIMIT ?", (limit,))
    return Sessions(sessions=[SessionInfo(**row) for row in rows])


class TitleSet(BaseModel):
    """Whether the session exists (and so now has the title)."""

    found: bool


MAX_TITLE_CHARS = 200
"""The longest title stored. Callers clean titles for display (the face cuts them shorter); this bounds the row."""


async def set_session_title(
    ctx: Context, session_id: str, title: Annotated[str, Field(max_length=MAX_TITLE_CHARS)]
) -> TitleSet:
    """Give a session a title (empty: none); found is false when there is no such session."""
    db = _db(ctx)
    with _reported():
        return TitleSet(found=await db.set_title(session_id, title))


async def _runs(ctx: Context, clause: str, params: Sequence[Any]) -> list[RunInfo]:
    db = _db(ctx)
    with _reported():
        rows = await db.runs(clause, params)
    return [RunInfo(**row) for row in rows]


async def get_run(ctx: Context, run_id: str) -> RunLookup:
    """One run, or null."""
    runs = await _runs(ctx, "WHERE id=?", (run_id,))
    return RunLookup(run=runs[0] if runs else None)


async def find_run(ctx: Context, prefix: Annotated[str, Field(min_length=1)]) -> RunLookup:
    """The run whose id starts with ``prefix``, if exactly one does."""
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    runs = await _runs(ctx, "WHERE id LIKE ? ESCAPE '\\' LIMIT 2", (escaped + "%",))
    return RunLookup(run=runs[0] if len(runs) == 1 else None)


async def list_runs(ctx: Context, session_id: str | None = None, limit: Annotated[int, Field(ge=1)] = 50) -> Runs:
    """The most recent runs first, of one session or of all."""
    if session_id is None:
        return Runs(runs=await _runs(ctx, "ORDER BY started DESC LIMIT ?", (limit,)))
    return Runs(runs=await _runs(ctx, "WHERE session_id=? ORDER BY started DESC LIMIT ?", (session_id, limit)))


async def list_runs_with_status(ctx: Context, status: str) -> Runs:
    """Every run currently in ``status`` (e.g. the ``running`` ones a crash left), oldest first."""
    return Runs(runs=await _runs(ctx, "WHERE status=? ORDER BY started", (status,)))


async def snapshot_file(
    ctx: Context,
    session_id: str,
    checkpoint: Annotated[str, Field(description="the checkpoint the snapshot belongs to, e.g. a run id and step")],
    path: Annotated[str, Field(description="the file's path, as the caller will restore it")],
    content_b64: Annotated[str | None, Field(description="the file's bytes in base64; null if it does not exist")],
) -> Snapshotted:
    """Record a file as it is before a change, under a checkpoint; the first snapshot of a path wins."""
    db = _db(ctx)
    try:
        content = None if content_b64 is None else base64.b64decode(content_b64, validate=True)
    except binascii.Error as exc:
        raise ToolError(f"content_b64 is not valid base64: {exc}") from exc
    with _reported():
        return Snapshotted(recorded=await db.snapshot(session_id, checkpoint, path, content, time.time()))


async def list_snapshots(ctx: Context, session_id: str, checkpoint: str | None = None) -> Snapshots:
    """A session's file snapshots (of one checkpoint, or all), oldest first, without content."""
    db = _db(ctx)
    with _reported():
        rows = await db.snapshots(session_id, checkpoint)
    return Snapshots(snapshots=[SnapshotInfo(checkpoint=c, path=p, existed=e, size=s, ts=t) for c, p, e, s, t in rows])


async def read_snapshot(ctx: Context, session_id: str, checkpoint: str, path: str) -> SnapshotContent:
    """One snapshot's content, for restoring the file."""
    db = _db(ctx)
    with _reported():
        found = await db.snapshot_content(session_id, checkpoint, path)
    if found is None:
        return SnapshotContent(found=False)
    existed, content = found
    encoded = None if content is None else base64.b64encode(content).decode("ascii")
    return SnapshotContent(found=True, existed=existed, content_b64=encoded)


_TOOLS: list[tuple[Callable[..., Any], ToolAnnotations]] = [
    (status, _READ),
    (append_events, _WRITE),
    (read_events, _READ),
    (find_tool_result, _READ),
    (read_context, _READ),
    (get_session, _READ),
    (list_sessions, _READ),
    (set_session_title, ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True)),
    (get_run, _READ),
    (find_run, _READ),
    (list_runs, _READ),
    (list_runs_with_status, _READ),
    (snapshot_file, ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True)),
    (list_snapshots, _READ),
    (read_snapshot, _READ),
]


def build_server(
    db_path: StoreLocation, *, read_only: bool = False, on_open: Callable[[StoreDatabase | None], None] | None = None
) -> MCPServer:
    """Build the checkpoints MCP server over the store at ``db_path``.

    Args:
        db_path: the SQLite file (created, with its directory) or the Postgres URL (its ``loom`` schema created);
            migrated unless ``read_only``.
        read_only: open the store read-only: reads work, every write fails with a clear error.
        on_open: told the database when a connection's lifespan opens it, and None when it closes it (an
            in-process client may then append through it directly: the same connection, numbering and errors).

    Returns:
        An MCPServer named ``"checkpoints"``. Its tools serve Loom's runtime, not a model.
    """

    @asynccontextmanager
    async def lifespan(_server: MCPServer) -> AsyncIterator[dict[str, Any]]:
        try:
            db = await open_database(db_path, read_only=read_only)
        except DatabaseError as exc:
            yield {"opened": Opened(None, str(exc))}
            return
        if on_open is not None:
            on_open(db)
        try:
            yield {"opened": Opened(db)}
        finally:
            if on_open is not None:
                on_open(None)
            await db.close()

    server: MCPServer = MCPServer(
        "checkpoints",
        version=loom_version(),
        instructions=(
            f"Loom's durable store ({'Postgres' if is_postgres_url(db_path) else 'SQLite'}, schema {SCHEMA_VERSION}): "
            "an append-only event log numbered per session, the session and run index derived from it, and file "
            "snapshots for rewind. "
            "These tools serve Loom's runtime; they are not meant for a model."
        ),
        lifespan=lifespan,
        log_level="WARNING",  # MCPServer configures root logging; an embedding process should not inherit INFO
    )
    for function, hints in _TOOLS:
        server.add_tool(function, annotations=hints)
    return server


def main(argv: Sequence[str] | None = None) -> int:
    """Serve the checkpoints tools over stdio (``loom server checkpoints`` and ``python -m servers.checkpoints``).

    Args:
        argv: Command-line arguments without the program name; ``sys.argv[1:]`` when None.

    Returns:
        The process exit status.
    """
    default = default_database("loom.db")
    parser = argparse.ArgumentParser(
        prog="loom server checkpoints", description="Serve Loom's durable store over MCP stdio."
    )
    parser.add_argument(
        "--db",
        default=str(default),
        metavar="PATH|URL",
        help=f"the SQLite file, or a postgresql://USER@HOST:PORT/DATABASE URL (default {default}); keep a "
        "password out of the command line (other users see it): libpq reads PGPASSWORD or ~/.pgpass",
    )
    parser.add_argument("--read-only", action="store_true", help="open the database read-only")
    args = parser.parse_args(argv)
    # A URL stays a string, so that one of another kind is refused as such rather than made a file of that name.
    location: StoreLocation = args.db if "://" in args.db else Path(args.db)
    return serve_stdio("checkpoints", lambda: build_server(location, read_only=args.read_only))
