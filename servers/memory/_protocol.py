"""The memory notes as MCP resources and a prompt, completion of namespaces and keys, and client logging.

- ``memory://{namespace}/{key}``: one note's body (``text/markdown``); ``memory://{namespace}``: the namespace as
  one markdown document (the ``notes_md`` view). ``resources/list`` lists the three namespace views and every note
  this server can see (its project's and session's, and the user's), described by the note's first line; both
  URI forms are also resource templates.
- the prompt ``notes`` (argument ``namespace``): the namespace's notes as one user message.
- completion of those templates and of the prompt: ``namespace`` from the namespaces, ``key`` from the keys
  stored in the namespace given (or in all three when none is).
- tools log ``info`` when they store or delete a note and a ``warning`` when they refuse
  (`servers._client_log`), for clients of the eras that have logging.

Served by one `MemoryProtocol` middleware object per server, reading the database the lifespan opened for the
connection: nothing else is built per server (issue 13).
"""

from __future__ import annotations

from typing import Any, Final
from urllib.parse import quote, unquote

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INVALID_PARAMS,
    CompleteRequestParams,
    CompleteResult,
    Completion,
    ListResourcesResult,
    ListResourceTemplatesResult,
    PromptReference,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    ResourceTemplateReference,
    TextResourceContents,
)

from servers._database import Opened
from servers.memory._db import NAMESPACES, Database, DatabaseError, NoteError, check_key, check_namespace, summary

__all__ = ["NAMESPACE_TEMPLATE", "NOTE_TEMPLATE", "MemoryProtocol"]

SCHEME: Final = "memory://"
NOTE_TEMPLATE: Final = "memory://{namespace}/{key}"
NAMESPACE_TEMPLATE: Final = "memory://{namespace}"
MARKDOWN: Final = "text/markdown"
MAX_COMPLETIONS: Final = 100

_TEMPLATES = [
    ResourceTemplate(
        uri_template=NOTE_TEMPLATE,
        name="note",
        title="A memory note",
        description=f"One note's body, by namespace ({', '.join(NAMESPACES)}) and key.",
        mime_type=MARKDOWN,
    ),
    ResourceTemplate(
        uri_template=NAMESPACE_TEMPLATE,
        name="notes.md",
        title="A namespace's notes as markdown",
        description="Every note of a namespace, a section per key, sorted by key.",
        mime_type=MARKDOWN,
    ),
]


def note_uri(namespace: str, key: str) -> str:
    """The resource URI of a note."""
    return f"{SCHEME}{namespace}/{quote(key, safe='')}"


class MemoryProtocol:
    """Server middleware answering the memory server's resources and completions from its connection's database."""

    leaves_tool_listing = True
    """Tool listings and ``server/discover`` pass through untouched, so the hub may reuse them (hub/transports.py)."""

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """Answer resources and completions; pass everything else on."""
        method = ctx.method
        if method == "resources/list":
            return ListResourcesResult(resources=await _listing(_db(ctx)))
        if method == "resources/templates/list":
            return ListResourceTemplatesResult(resource_templates=_TEMPLATES)
        if method == "resources/read":
            uri = str((ctx.params or {}).get("uri", ""))
            if uri.startswith(SCHEME):
                return await _read(_db(ctx), uri)
        elif method == "completion/complete":
            params = CompleteRequestParams.model_validate(ctx.params or {})
            ref = params.ref
            ours = isinstance(ref, PromptReference) and ref.name == "notes"
            if ours or (isinstance(ref, ResourceTemplateReference) and ref.uri in (NOTE_TEMPLATE, NAMESPACE_TEMPLATE)):
                given = (params.context.arguments if params.context else None) or {}
                return CompleteResult(
                    completion=await _complete(ctx, params.argument.name, params.argument.value, given)
                )
        return await call_next(ctx)


def _db(ctx: ServerRequestContext[Any, Any]) -> Database:
    opened: Opened[Database] = ctx.lifespan_context["opened"]
    try:
        return opened.require()
    except ToolError as exc:
        raise MCPError(code=INVALID_PARAMS, message=str(exc)) from exc


async def _listing(db: Database) -> list[Resource]:
    resources: list[Resource] = []
    for namespace in NAMESPACES:
        try:
            notes = await db.notes(namespace)
        except DatabaseError as exc:
            raise MCPError(code=INVALID_PARAMS, message=str(exc)) from exc
        resources.append(
            Resource(
                uri=f"{SCHEME}{namespace}",
                name=f"{namespace} notes.md",
                description=f"The {len(notes)} {namespace} notes as one markdown document",
                mime_type=MARKDOWN,
            )
        )
        resources.extend(
            Resource(
                uri=note_uri(namespace, note.key),
                name=f"{namespace}/{note.key}",
                description=summary(note.body),
                mime_type=MARKDOWN,
            )
            for note in notes
        )
    return resources


async def _read(db: Database, uri: str) -> ReadResourceResult:
    from servers.memory._server import render_markdown  # the notes_md tool's rendering, one definition

    namespace, slash, key = uri[len(SCHEME) :].partition("/")
    try:
        check_namespace(namespace)
        if not slash:
            text = render_markdown(namespace, await db.notes(namespace))
        else:
            note = await db.get(namespace, check_key(unquote(key)))
            if note is None:
                raise NoteError(f"no note {unquote(key)!r} in namespace {namespace!r}; resources/list shows them")
            text = note.body
    except (NoteError, DatabaseError) as exc:
        raise MCPError(code=INVALID_PARAMS, message=str(exc), data={"uri": uri}) from exc
    return ReadResourceResult(contents=[TextResourceContents(uri=uri, mime_type=MARKDOWN, text=text)])


async def _complete(
    ctx: ServerRequestContext[Any, Any], argument: str, value: str, given: dict[str, str]
) -> Completion:
    if argument == "namespace":
        values = [namespace for namespace in NAMESPACES if namespace.startswith(value)]
    elif argument == "key":
        namespace = given.get("namespace")
        spaces = [namespace] if namespace in NAMESPACES else list(NAMESPACES) if namespace is None else []
        db = _db(ctx)
        keys: set[str] = set()
        for space in spaces:
            keys.update(note.key for note in await db.notes(space) if note.key.startswith(value))
        values = sorted(keys)
    else:
        values = []
    return Completion(values=values[:MAX_COMPLETIONS], total=len(values), has_more=len(values) > MAX_COMPLETIONS)
