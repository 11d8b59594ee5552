"""The checkpoints MCP server: Loom's durable state in SQLite (aiosqlite, WAL mode) or Postgres (psycopg 3).

It owns the event log (events stored as JSON, numbered per session), the session and run index
derived from it, and file snapshots for rewind; the schema is versioned and migrated on open.
Use `build_server` to serve it in-process (``Client(build_server(path))``) and `main` to serve it
over stdio (``loom server checkpoints --db PATH``). A ``postgresql://`` URL in place of the path puts the store in
that database's ``loom`` schema, shared by every process that opens it; `mask_url` is how such a URL is shown.
"""

from __future__ import annotations

from servers.checkpoints._db import SCHEMA_VERSION
from servers.checkpoints._pg_errors import is_postgres_url, mask_url
from servers.checkpoints._server import build_server, main

__all__ = ["SCHEMA_VERSION", "build_server", "is_postgres_url", "main", "mask_url"]
