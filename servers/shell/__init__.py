"""The shell MCP server: one ``run`` tool that executes commands inside a root directory.

Use `build_server` to serve it in-process (``Client(build_server(root))``) and `main` to serve it over stdio.
"""

from __future__ import annotations

from servers.shell._cli import main
from servers.shell._server import build_server, prepare_server

__all__ = ["build_server", "main", "prepare_server"]
