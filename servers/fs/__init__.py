"""The fs MCP server: read, write, edit, delete, list, glob and grep, confined to a set of root directories.

Use `build_server` to serve it in-process (``Client(build_server([root]))``) and `main` to serve it over stdio.
"""

from __future__ import annotations

from servers.fs._server import build_server, main, prepare_server

__all__ = ["build_server", "main", "prepare_server"]
