"""File snapshots for rewind: the fs server's ``before_change`` hook, writing through the store.

The fs server calls the hook in its tool's worker thread just before write, edit or delete changes a
file; the hook hands the file's prior content to the store under the session's current run (its
checkpoint) and returns only once it is stored, so no change happens that a rewind could not undo.
"""

from __future__ import annotations

from pathlib import Path

import anyio.from_thread

from orchestrator.store.interface import Store

MAX_SNAPSHOT_BYTES = 32 * 1024 * 1024
"""Largest file Loom changes through its fs tools; keeping a copy of anything bigger is not worth it."""


class FileSnapshots:
    """One session's snapshotting hook; :attr:`run_id` is the checkpoint new snapshots belong to."""

    def __init__(self, store: Store, session_id: str) -> None:
        self.store = store
        self.session_id = session_id
        self.run_id: str | None = None
        """The run in progress, set by the session before each run or resume."""

    def before_change(self, path: Path, content: bytes | None) -> None:
        """Store ``path``'s current content (None: absent) before the fs server changes it.

        Raises:
            ValueError: the file is too large to keep a copy of (the change is then refused).
            orchestrator.store.interface.StoreError: the store could not keep it (the change is then refused).
        """
        if self.run_id is None:
            return  # not during a run (a test driving the server directly): nothing to rewind to
        if content is not None and len(content) > MAX_SNAPSHOT_BYTES:
            raise ValueError(
                f"the file is {len(content)} bytes, over the {MAX_SNAPSHOT_BYTES} Loom keeps for rewind; "
                "change it another way (the shell) if you must"
            )
        anyio.from_thread.run(self.store.snapshot_file, self.session_id, self.run_id, str(path), content)
