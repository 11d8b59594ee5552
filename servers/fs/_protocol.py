"""What the fs server offers beside its tools: files as a resource template, path completion, client logs.

- ``fs://{+path}`` (a resource template): a file under the primary root, read whole (up to `MAX_RESOURCE_BYTES`)
  as text, or as a blob when it is not UTF-8. The path goes through `Roots.resolve` and `Roots.open`, as every
  tool's does: nothing outside the roots or in a hidden directory is read, whatever the URI spells.
- completion of that template's ``path``: the names in the directory typed so far, directories with a trailing
  ``/``. Confined like a read (a prefix leading outside the roots or into a hidden directory completes to
  nothing), and names starting with ``.`` are offered only when the typed name starts with one: a secret's name
  is not volunteered.
- a file that ``write``, ``edit`` or ``delete`` changed is published as updated to 2026-07-28
  ``subscriptions/listen`` streams watching its ``fs://`` URI (the SDK declares ``subscribe`` there; handshake-era
  connections declare no resource subscriptions, so they re-read).
- a ``warning`` to the client's log when a tool refuses (`servers._client_log.RefusalLog`), and
  ``logging/setLevel`` for handshake-era clients.

All of it is served by one `FsProtocol` middleware object per server, holding that server's roots: nothing is
built per server beyond that object (issue 13: a session's servers are set up in microseconds).
"""

from __future__ import annotations

import base64
import mimetypes
import os
import stat
from typing import Any, Final
from urllib.parse import unquote

import anyio
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.subscriptions import SubscriptionBus
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourceUpdated
from mcp.types import (
    INVALID_PARAMS,
    BlobResourceContents,
    CompleteRequestParams,
    CompleteResult,
    Completion,
    ListResourceTemplatesResult,
    ReadResourceResult,
    ResourceTemplate,
    ResourceTemplateReference,
    TextResourceContents,
)

from servers._client_log import is_error, send
from servers.fs._files import oserror_message
from servers.fs._paths import Roots

__all__ = ["FILE_TEMPLATE", "MAX_COMPLETIONS", "MAX_RESOURCE_BYTES", "FsProtocol"]

SCHEME: Final = "fs://"
FILE_TEMPLATE: Final = "fs://{+path}"
MAX_RESOURCE_BYTES: Final = 256 * 1024
"""The largest file read as a resource (the read tool pages through larger ones)."""
MAX_COMPLETIONS: Final = 100
"""The spec's cap on the values of one completion."""

_CHANGES: Final = frozenset({"write", "edit", "delete"})
"""The tools after which the file named by their ``path`` has changed."""

_TEMPLATE = ResourceTemplate(
    uri_template=FILE_TEMPLATE,
    name="file",
    title="A file under the primary root",
    description=(
        "A file by its path relative to the primary root, read whole (at most 256 KiB): text when it is UTF-8, "
        "else a blob. Paths outside the roots are refused, as by the tools."
    ),
)


class FsProtocol:
    """Server middleware answering resource templates, ``fs://`` reads and path completions for one server.

    Args:
        roots: The server's roots (the ones its tools use).
        bus: The server's subscription bus (``MCPServer(subscriptions=...)``), told of the files tools change.
    """

    leaves_tool_listing = True
    """Tool listings and ``server/discover`` pass through untouched, so the hub may reuse them (hub/transports.py)."""

    def __init__(self, roots: Roots, bus: SubscriptionBus | None = None) -> None:
        self._roots = roots
        self._bus = bus

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """Answer what this server adds to MCP; pass everything else on."""
        method = ctx.method
        if method == "tools/call":
            result = await call_next(ctx)
            call = ctx.params or {}
            if self._bus is not None and call.get("name") in _CHANGES and not is_error(result):
                path = (call.get("arguments") or {}).get("path")
                if isinstance(path, str):
                    await self._changed(path)
            return result
        if method == "resources/templates/list":
            return ListResourceTemplatesResult(resource_templates=[_TEMPLATE])
        if method == "resources/read":
            uri = str((ctx.params or {}).get("uri", ""))
            if uri.startswith(SCHEME):
                return await self._read(ctx, uri)
        elif method == "completion/complete":
            params = CompleteRequestParams.model_validate(ctx.params or {})
            ref = params.ref
            if isinstance(ref, ResourceTemplateReference) and ref.uri == FILE_TEMPLATE:
                if params.argument.name != "path":
                    return CompleteResult(completion=Completion(values=[]))
                return CompleteResult(completion=await anyio.to_thread.run_sync(self.complete, params.argument.value))
        return await call_next(ctx)

    async def _changed(self, path: str) -> None:
        try:
            shown = self._roots.display(self._roots.resolve(path))
        except ToolError:
            return
        assert self._bus is not None
        await self._bus.publish(ResourceUpdated(uri=SCHEME + shown))

    async def _read(self, ctx: ServerRequestContext[Any, Any], uri: str) -> ReadResourceResult:
        try:
            data = await anyio.to_thread.run_sync(self._read_file, unquote(uri[len(SCHEME) :]))
        except ToolError as exc:
            await send(ctx.session, "warning", f"resources/read {uri}: {exc}", name="fs", request_id=ctx.request_id)
            raise MCPError(code=INVALID_PARAMS, message=str(exc), data={"uri": uri}) from exc
        mime = mimetypes.guess_type(uri[len(SCHEME) :])[0]
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            blob = base64.b64encode(data).decode("ascii")
            return ReadResourceResult(
                contents=[BlobResourceContents(uri=uri, mime_type=mime or "application/octet-stream", blob=blob)]
            )
        return ReadResourceResult(contents=[TextResourceContents(uri=uri, mime_type=mime or "text/plain", text=text)])

    def _read_file(self, path: str) -> bytes:
        target = self._roots.resolve(path)
        shown = self._roots.display(target)
        try:
            fd = self._roots.open(target, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            raise ToolError(f"file {shown!r} does not exist") from None
        except OSError as exc:
            raise ToolError(oserror_message(exc, repr(shown))) from exc
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            raise ToolError(f"{shown!r} is not a regular file; only files are resources here (list shows a directory)")
        with open(fd, "rb") as handle:
            if info.st_size > MAX_RESOURCE_BYTES:
                raise ToolError(
                    f"{shown!r} is {info.st_size} bytes, over the {MAX_RESOURCE_BYTES} a resource holds; "
                    "read it with the read tool, which pages through it"
                )
            return handle.read(MAX_RESOURCE_BYTES + 1)[:MAX_RESOURCE_BYTES]

    def complete(self, value: str) -> Completion:
        """The paths under the roots that ``value`` (a partial path relative to the primary root) may become."""
        head, slash, prefix = value.rpartition("/")
        directory = head + slash if slash else ""
        try:
            # "." for the root itself; resolve refuses what leads outside the roots or into a hidden directory.
            resolved = self._roots.resolve(head or ("/" if slash else "."))
        except ToolError:
            return Completion(values=[], total=0, has_more=False)
        try:
            fd = self._roots.open(resolved, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            return Completion(values=[], total=0, has_more=False)
        names: list[str] = []
        try:
            with os.scandir(fd) as entries:
                for entry in entries:
                    name = entry.name
                    if not name.startswith(prefix) or (name.startswith(".") and not prefix.startswith(".")):
                        continue
                    if self._roots.is_hidden(resolved / name):
                        continue
                    names.append(name + "/" if entry.is_dir(follow_symlinks=False) else name)
        except OSError:
            return Completion(values=[], total=0, has_more=False)
        finally:
            os.close(fd)
        names.sort()
        values = [directory + name for name in names[:MAX_COMPLETIONS]]
        return Completion(values=values, total=len(names), has_more=len(names) > MAX_COMPLETIONS)
