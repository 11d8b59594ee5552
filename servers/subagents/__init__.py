"""The subagents MCP server: child agents as sessions, started and followed through Loom's own face.

`prepare_server` gives the server of one session (the runtime adds it to every session it opens), `build_server`
the same built at once, and `main` serves it over stdio against the daemon (``loom server subagents``).
"""

from __future__ import annotations

from servers.subagents._local import in_process
from servers.subagents._server import Connect, build_server, main, prepare_server
from servers.subagents._summary import ChildState, ChildSummary, child_state, open_questions, summarize

__all__ = [
    "ChildState",
    "ChildSummary",
    "Connect",
    "build_server",
    "child_state",
    "in_process",
    "main",
    "open_questions",
    "prepare_server",
    "summarize",
]
