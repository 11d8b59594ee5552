"""``loom server NAME``: hand the process over to one of Loom's own MCP servers."""

from __future__ import annotations

from collections.abc import Sequence


def serve_builtin(name: str, argv: Sequence[str]) -> int:
    """Serve ``fs`` or ``shell`` over stdio until the client disconnects."""
    if name == "fs":
        from servers import fs

        return fs.main(list(argv))
    from servers import shell

    return shell.main(list(argv))
