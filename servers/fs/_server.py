"""Assembly of the fs server and its stdio entry point."""

from __future__ import annotations

import argparse
import inspect
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.server.subscriptions import InMemorySubscriptionBus
from mcp.types import ToolAnnotations

from servers import _client_log
from servers._client_log import RefusalLog
from servers._stdio import serve_stdio
from servers._tools import Binding, DeferredServer
from servers._version import loom_version
from servers.fs._files import BeforeChange, FileTools
from servers.fs._links import HardLinks
from servers.fs._names import escape
from servers.fs._paths import Roots
from servers.fs._protocol import FsProtocol
from servers.fs._search import SearchTools

__all__ = ["build_server", "main", "prepare_server"]

_READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
_WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)
_CHANGE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False)


def build_server(
    roots: Sequence[Path], *, before_change: BeforeChange | None = None, hidden: Sequence[Path] = ()
) -> MCPServer:
    """Build the fs MCP server, confined to the given directories.

    Args:
        roots: Existing directories the tools may touch. The first is the primary root: relative paths resolve
            against it and reported paths are relative to it.
        before_change: Called with a file's path and current content before write, edit or delete changes it
            (Loom snapshots files for rewind this way); if it raises, the change is refused.
        hidden: Directories inside the roots the tools never read, list or search (Loom's home, with its daemon
            token, when a workspace holds it).

    Returns:
        An MCPServer named ``"fs"`` with the tools read, write, edit, delete, list, glob and grep; files as the
        resource template ``fs://{+path}`` with completion of its path; logging to the client (see
        `servers.fs._protocol`).

    Raises:
        ValueError: If no root is given or a root is not an existing directory.
    """
    return prepare_server(roots, before_change=before_change, hidden=hidden).build()


def prepare_server(
    roots: Sequence[Path], *, before_change: BeforeChange | None = None, hidden: Sequence[Path] = ()
) -> DeferredServer:
    """The fs server of `build_server`, its roots checked and opened now, the ``MCPServer`` built on first use.

    Raises:
        ValueError: As `build_server`.
    """
    allowed = Roots(roots, hidden)
    # One record of the files this server created, so a file write made may be edited even once it is linked.
    links = HardLinks()
    files = FileTools(allowed, before_change, links)
    search = SearchTools(allowed, links)
    tools: list[tuple[str, Callable[..., Any], ToolAnnotations]] = [
        ("read", files.read, _READ_ONLY),
        ("write", files.write, _WRITE),
        ("edit", files.edit, _CHANGE),
        ("delete", files.delete, _CHANGE),
        ("list", files.list_dir, _READ_ONLY),
        ("glob", search.glob, _READ_ONLY),
        ("grep", search.grep, _READ_ONLY),
    ]

    def make(bound: list[Tool]) -> MCPServer:
        listed = ", ".join(escape(str(root)) for root in allowed.all)
        bus = InMemorySubscriptionBus()  # what MCPServer makes by default, held here to publish file changes
        server = MCPServer(
            "fs",
            version=loom_version(),
            instructions=(
                f"File tools confined to these directories: {listed}. Relative paths resolve against "
                f"{escape(str(allowed.primary))}, and paths in results are relative to it when inside it."
            ),
            # Bound to this server's roots; their schemas were built once for the process (servers._tools).
            tools=bound,
            # MCPServer configures root logging at INFO by default; an embedding process should not inherit that.
            log_level="WARNING",
            # Resource templates, fs:// reads and path completion, over this server's roots; refusals logged.
            middleware=[RefusalLog("fs"), FsProtocol(allowed, bus)],
            subscriptions=bus,
        )
        _client_log.install(server)
        # Declares the completions capability; FsProtocol answers the requests before they reach this.
        server.completion()(_no_completion)  # type: ignore[no-untyped-call]  # untyped in SDK 2.3
        return server

    # getdoc dedents the method docstring, which is the description the model reads.
    bindings = [Binding(fn, name, inspect.getdoc(fn), hints) for name, fn, hints in tools]
    return DeferredServer("fs", bindings, make)


async def _no_completion(ref: object, argument: object, context: object) -> None:
    """No values for references other than fs's own (answered by `FsProtocol`)."""
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Serve the fs tools over stdio (``loom server fs`` and ``python -m servers.fs``).

    Args:
        argv: Command-line arguments without the program name; ``sys.argv[1:]`` when None.

    Returns:
        The process exit status.
    """
    parser = argparse.ArgumentParser(prog="loom server fs", description="Serve file tools over MCP stdio.")
    parser.add_argument(
        "--root",
        action="append",
        type=Path,
        dest="roots",
        metavar="DIR",
        help="directory the tools may touch; repeat for several (the first is primary; default: the current one)",
    )
    args = parser.parse_args(argv)
    return serve_stdio("fs", lambda: build_server(args.roots or [Path.cwd()]))
