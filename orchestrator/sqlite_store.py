"""The old name of the store, kept so that existing imports keep working.

SQLite now lives in Loom's checkpoints MCP server (``servers/checkpoints``); the orchestrator reaches
it through :class:`orchestrator.checkpoint_store.CheckpointStore` and touches no SQLite itself.
"""

from __future__ import annotations

from orchestrator.checkpoint_store import CheckpointStore as SqliteStore

__all__ = ["SqliteStore"]
