"""The memory MCP server: notes in namespaces (user, project, session), persisted in SQLite.

Each note is a body of text under a short slug key in one namespace, with created and updated
times. ``user`` notes are shared by everything that uses the database; ``project`` notes belong to
the current project and ``session`` notes to the current session, so one database file serves many
projects and sessions. ``list`` gives the index (key, first line, updated time) a model would see
in its system prompt; ``get`` pulls a body on demand; ``notes_md`` renders a namespace as markdown.
Use `build_server` to serve it in-process (``Client(build_server(path, project=ROOT, session=ID))``)
and `main` to serve it over stdio (``python -m servers.memory --db PATH [--project SCOPE] [--session SCOPE]``).
"""

from __future__ import annotations

from servers.memory._db import MAX_BODY_BYTES, NAMESPACES, SCHEMA_VERSION
from servers.memory._server import build_server, main, prepare_server

__all__ = ["MAX_BODY_BYTES", "NAMESPACES", "SCHEMA_VERSION", "build_server", "main", "prepare_server"]
