"""Assembly of the memory server: its tools, their result models, and the stdio entry point.

The database is opened in the server's lifespan, once per connection. A database that cannot be
opened does not stop the server: every tool then answers with the reason. A server belongs to one
project and one session (``build_server(..., project=, session=)``): its tools read and write the
``project`` and ``session`` namespaces of those only, while ``user`` notes are shared by all.
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.prompts import Prompt
from mcp.server.mcpserver.prompts.base import UserMessage
from mcp.server.mcpserver.tools import Tool
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from servers import _client_log
from servers._client_log import RefusalLog
from servers._database import Opened, default_database
from servers._stdio import serve_stdio
from servers._tools import Binding, DeferredServer
from servers._version import loom_version
from servers.memory._db import MAX_BODY_BYTES, NAMESPACES, Database, DatabaseError, Note, NoteError, snippet, summary
from servers.memory._protocol import SCHEME, MemoryProtocol, note_uri

__all__ = ["build_server", "main", "prepare_server"]

_READ = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
_SET = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
_ARCHIVE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
_DELETE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False)

_NAMESPACE = Field(
    description=(
        f"one of {', '.join(NAMESPACES)}: user notes are shared by every project and session, "
        "project notes belong to the current project, session notes to the current session"
    )
)
_KEY = Field(description="a short slug: lowercase letters, digits, '.', '_', '-' (at most 64 characters)")


class NoteOut(BaseModel):
    """One note with its body; times are seconds since the epoch."""

    namespace: str
    key: str
    body: str
    created: float
    updated: float


class Written(BaseModel):
    """The note as stored, and whether ``set`` created it (false: it replaced an existing body)."""

    created_note: bool
    note: NoteOut


class IndexEntry(BaseModel):
    """A note in the index: its key, the first line of its body, and when it last changed."""

    key: str
    summary: str
    updated: float


class Index(BaseModel):
    """A namespace's notes, sorted by key, without their bodies."""

    namespace: str
    notes: list[IndexEntry]


class Match(BaseModel):
    """A note that matched a search, with the text around the match."""

    namespace: str
    key: str
    snippet: str
    updated: float


class Matches(BaseModel):
    """Search results, by namespace then key."""

    query: str
    matches: list[Match]


class Deleted(BaseModel):
    """The note that was removed."""

    namespace: str
    key: str


class Archived(BaseModel):
    """What ``archive`` did: the session's notes promoted to the project namespace (copies; nothing overwritten)."""

    from_namespace: str = "session"
    to_namespace: str = "project"
    keys: list[str]
    """The project keys the session's notes now have there (a renamed note under its new key)."""
    renamed: dict[str, str]
    """Session key -> project key, where the project already had a different note under the session's key."""
    unchanged: list[str]
    """Session keys whose note the project already had word for word."""
    skipped: list[str]
    """``key: why`` for notes that could not be promoted."""


class NotesMarkdown(BaseModel):
    """A namespace rendered as markdown: ``# namespace`` then a ``## key`` section per note."""

    namespace: str
    markdown: str


def _db(ctx: Context) -> Database:
    opened: Opened[Database] = ctx.request_context.lifespan_context["opened"]
    return opened.require()


@contextmanager
def _reported() -> Iterator[None]:
    """Turn store refusals and database failures into tool errors whose text the client shows as is."""
    try:
        yield
    except (DatabaseError, NoteError) as exc:
        raise ToolError(str(exc)) from exc


async def _tell(ctx: Context, message: str) -> None:
    """An ``info`` line for the client's log (handshake eras, or a 2026-07-28 request that opted in)."""
    await _client_log.send(ctx.request_context.session, "info", message, name="memory", request_id=ctx.request_id)


async def _changed(ctx: Context, namespace: str, key: str, *, listing: bool) -> None:
    """Tell ``subscriptions/listen`` streams (2026-07-28) that a note and its namespace's view changed.

    Handshake-era connections declare neither ``subscribe`` nor ``listChanged`` for resources (the SDK's
    `MCPServer` serves no ``resources/subscribe``), so they re-read; nobody listening costs a publish to no one.
    """
    if listing:
        await ctx.notify_resources_changed()
    await ctx.notify_resource_updated(note_uri(namespace, key))
    await ctx.notify_resource_updated(f"{SCHEME}{namespace}")


def _out(note: Note) -> NoteOut:
    return NoteOut(namespace=note.namespace, key=note.key, body=note.body, created=note.created, updated=note.updated)


async def set_note(
    ctx: Context,
    namespace: Annotated[str, _NAMESPACE],
    key: Annotated[str, _KEY],
    body: Annotated[str, Field(description=f"the note's text (at most {MAX_BODY_BYTES} bytes)")],
) -> Written:
    """Create a note, or replace the body of an existing one (its created time is kept)."""
    db = _db(ctx)
    with _reported():
        note, created = await db.set(namespace, key, body)
    await _tell(ctx, f"{'created' if created else 'replaced'} note {namespace}/{note.key} ({len(body)} characters)")
    await _changed(ctx, namespace, note.key, listing=created)
    return Written(created_note=created, note=_out(note))


async def get_note(ctx: Context, namespace: Annotated[str, _NAMESPACE], key: Annotated[str, _KEY]) -> NoteOut:
    """One note with its full body; an error when there is none."""
    db = _db(ctx)
    with _reported():
        note = await db.get(namespace, key)
    if note is None:
        raise ToolError(f"no note {key!r} in namespace {namespace!r}; list shows the keys there are")
    return _out(note)


async def list_notes(ctx: Context, namespace: Annotated[str, _NAMESPACE]) -> Index:
    """The index of a namespace: each note's key, first line and updated time, sorted by key."""
    db = _db(ctx)
    with _reported():
        notes = await db.notes(namespace)
    return Index(
        namespace=namespace,
        notes=[IndexEntry(key=n.key, summary=summary(n.body), updated=n.updated) for n in notes],
    )


async def search_notes(
    ctx: Context,
    query: Annotated[str, Field(description="text to find in keys and bodies, case-insensitive")],
    namespace: Annotated[
        str | None,
        Field(description="only this namespace (default: all, with the current project's and session's notes)"),
    ] = None,
) -> Matches:
    """Notes whose key or body contains ``query`` (case-insensitive), with a snippet around the match."""
    db = _db(ctx)
    with _reported():
        notes = await db.search(query, namespace)
    return Matches(
        query=query,
        matches=[
            Match(namespace=n.namespace, key=n.key, snippet=snippet(n.body, query), updated=n.updated) for n in notes
        ],
    )


async def delete_note(ctx: Context, namespace: Annotated[str, _NAMESPACE], key: Annotated[str, _KEY]) -> Deleted:
    """Remove a note for good; an error when there is none."""
    db = _db(ctx)
    with _reported():
        removed = await db.delete(namespace, key)
    if not removed:
        raise ToolError(f"no note {key!r} in namespace {namespace!r}; nothing was deleted")
    await _tell(ctx, f"deleted note {namespace}/{key}")
    await _changed(ctx, namespace, key, listing=True)
    return Deleted(namespace=namespace, key=key)


async def archive_notes(ctx: Context) -> Archived:
    """Promote this session's notes to the project namespace, so later sessions of the project start with them.

    Copies: the session keeps its own. A project note is never overwritten: where the project has another note under
    the same key, the session's goes beside it under ``<key>.<session>``. Running it again promotes nothing twice.
    """
    db = _db(ctx)
    with _reported():
        done = await db.archive()
    if done.promoted:
        await _tell(ctx, f"promoted {len(done.promoted)} session note(s) to the project: {', '.join(done.promoted)}")
        for key in done.promoted:
            await _changed(ctx, "project", key, listing=True)
    return Archived(keys=done.promoted, renamed=done.renamed, unchanged=done.unchanged, skipped=done.skipped)


def render_markdown(namespace: str, notes: Sequence[Note]) -> str:
    """``# namespace`` then, per note in the given order, ``## key`` and its body."""
    parts = [f"# {namespace}\n"]
    if not notes:
        parts.append("\n_(no notes)_\n")
    for note in notes:
        parts.append(f"\n## {note.key}\n\n{note.body.rstrip()}\n")
    return "".join(parts)


async def notes_md(ctx: Context, namespace: Annotated[str, _NAMESPACE]) -> NotesMarkdown:
    """A namespace as one markdown document (a ``notes.md`` view): a section per note, sorted by key."""
    db = _db(ctx)
    with _reported():
        notes = await db.notes(namespace)
    return NotesMarkdown(namespace=namespace, markdown=render_markdown(namespace, notes))


async def notes_prompt(ctx: Context, namespace: Annotated[str, _NAMESPACE]) -> list[UserMessage]:
    """A namespace's notes as one message, to hand the model what was remembered (``/notes user`` in a client)."""
    db = _db(ctx)
    with _reported():
        notes = await db.notes(namespace)
    return [UserMessage(f"My {namespace} notes, as kept in Loom's memory:\n\n{render_markdown(namespace, notes)}")]


_PROMPT = Prompt.from_function(notes_prompt, name="notes", title="Remembered notes")
"""Built once per process (its argument model costs milliseconds); every memory server adds this same object."""


def build_server(db_path: Path, *, project: str = "", session: str = "") -> MCPServer:
    """Build the memory MCP server over the SQLite file at ``db_path``, for one project and one session.

    Many servers may share one file. The tools still name a namespace (user, project or session);
    the server stores and finds ``project`` notes under the scope ``project`` and ``session`` notes
    under the scope ``session``, so servers with other scopes never see them. Scopes are opaque
    strings compared exactly: the caller should pass a canonical form (e.g. a resolved path).

    Args:
        db_path: the database file; created (with its directory) and migrated if needed.
        project: the current project, e.g. its root path; ``''`` (the default) is the unscoped project namespace.
        session: the current session, e.g. its id; ``''`` (the default) is the unscoped session namespace.

    Returns:
        An MCPServer named ``"memory"`` with the tools set, get, list, search, delete, notes_md and archive, the
        notes as ``memory://`` resources with completion of namespaces and keys, and logging to the client (see
        `servers.memory._protocol`).
    """
    return prepare_server(db_path, project=project, session=session).build()


def prepare_server(db_path: Path, *, project: str = "", session: str = "") -> DeferredServer:
    """The memory server of `build_server`, its ``MCPServer`` built on first use (its database opens then too)."""

    @asynccontextmanager
    async def lifespan(_server: MCPServer) -> AsyncIterator[dict[str, Any]]:
        try:
            db = await Database.open(db_path, project=project, session=session)
        except DatabaseError as exc:
            yield {"opened": Opened(None, str(exc))}
            return
        try:
            yield {"opened": Opened(db)}
        finally:
            await db.close()

    def make(bound: list[Tool]) -> MCPServer:
        server = MCPServer(
            "memory",
            version=loom_version(),
            instructions=_INSTRUCTIONS,
            # Module functions reading this server's database from its lifespan; their schemas were built once for
            # the process (servers._tools).
            tools=bound,
            lifespan=lifespan,
            log_level="WARNING",
            # The notes as resources, namespace and key completion; refusals logged to the client.
            middleware=[RefusalLog("memory"), _PROTOCOL],
        )
        server.add_prompt(_PROMPT)
        _client_log.install(server)
        # Declares the completions capability; MemoryProtocol answers the requests before they reach this.
        server.completion()(_no_completion)  # type: ignore[no-untyped-call]  # untyped in SDK 2.3
        return server

    return DeferredServer("memory", _BINDINGS, make)


_PROTOCOL = MemoryProtocol()
"""Stateless (it reads the connection's database from the lifespan), so one serves every memory server."""


async def _no_completion(ref: object, argument: object, context: object) -> None:
    """No values for references other than memory's own (answered by `MemoryProtocol`)."""
    return None


_INSTRUCTIONS = (
    f"Notes kept on disk across restarts, in the namespaces {', '.join(NAMESPACES)}. "
    "`user` notes are shared by every project and session; `project` notes belong to the current "
    "project, and `session` notes to the current session, so other projects and sessions never see them. "
    "`list` gives a namespace's index (key and first line); `get` pulls a body when you need it; "
    "`set` stores or replaces a note; `search` finds text; `delete` removes a note; "
    "`notes_md` shows a namespace as markdown; `archive` copies this session's notes to the project."
)
_BINDINGS = (
    Binding(set_note, "set", annotations=_SET),
    Binding(get_note, "get", annotations=_READ),
    Binding(list_notes, "list", annotations=_READ),
    Binding(search_notes, "search", annotations=_READ),
    Binding(delete_note, "delete", annotations=_DELETE),
    Binding(notes_md, "notes_md", annotations=_READ),
    Binding(archive_notes, "archive", annotations=_ARCHIVE),
)


def main(argv: Sequence[str] | None = None) -> int:
    """Serve the memory tools over stdio (``python -m servers.memory --db PATH [--project SCOPE] [--session SCOPE]``).

    Args:
        argv: Command-line arguments without the program name; ``sys.argv[1:]`` when None.

    Returns:
        The process exit status.
    """
    default = default_database("memory.db")
    parser = argparse.ArgumentParser(
        prog="python -m servers.memory", description="Serve Loom's memory notes over MCP stdio."
    )
    parser.add_argument("--db", type=Path, default=default, metavar="PATH", help=f"the database (default {default})")
    parser.add_argument(
        "--project",
        default="",
        metavar="SCOPE",
        help="the current project (e.g. its root path): project notes are stored and found under it (default '')",
    )
    parser.add_argument(
        "--session",
        default="",
        metavar="SCOPE",
        help="the current session (e.g. its id): session notes are stored and found under it (default '')",
    )
    args = parser.parse_args(argv)
    return serve_stdio("memory", lambda: build_server(args.db, project=args.project, session=args.session))
