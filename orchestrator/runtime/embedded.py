"""The embedded default: one process, one SQLite file under ``LOOM_HOME``, behind the checkpoints server.

This is the public surface the headless CLI uses; it hides which store backs the runtime.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.events import Event
from orchestrator.home import DB_NAME
from orchestrator.runtime.lock import RuntimeLock
from orchestrator.store.checkpoints import CheckpointStore
from orchestrator.store.interface import RunRecord

# The runtime is imported lazily: `loom --help` must not pay for it. `loom runs`/`export` do pay for
# the MCP SDK now (~1 s), since reading the store means talking to the checkpoints server.
if TYPE_CHECKING:
    from orchestrator.config import LoomConfig, ServerConfig
    from orchestrator.runtime.runtime import Runtime
    from orchestrator.store.eventlog import EventLog


@contextlib.asynccontextmanager
async def embedded_runtime(
    home: Path, servers: Sequence[ServerConfig] = (), *, config: LoomConfig | None = None, shared: bool = False
) -> AsyncIterator[Runtime]:
    """A runtime over ``home/loom.db``, with ``config``'s servers, tool timeouts, shell options and model if given.

    The runtime holds ``home``'s writer lock while open (:mod:`orchestrator.runtime.lock`): one process at a
    time runs sessions on a home. The daemon's runtime is one of these too. ``shared`` is for a runtime that
    only writes the one session it creates (``loom run``): several such may run at once, but not beside a face.

    Raises:
        orchestrator.runtime.lock.HomeInUse: another process has a runtime open on ``home``.
        orchestrator.store.interface.StoreError: the database cannot be opened.
    """
    from orchestrator.runtime.runtime import Runtime
    from orchestrator.store.eventlog import EventLog

    if config is not None and config.engine is not None and config.engine.distributed:
        from orchestrator.engine.face_runtime import distributed_runtime

        async with distributed_runtime(home, config, shared=shared) as runtime:
            yield runtime
        return
    # The store first: a home it cannot open (a read-only disk, say) is reported with the database's advice,
    # not as a lock file that could not be created. Two processes may open the store; only one holds the lock.
    async with CheckpointStore(home / DB_NAME) as store:
        with RuntimeLock(home, shared=shared):
            if config is None:
                yield Runtime(EventLog(store), home=home, servers=servers)
            else:
                yield configured_runtime(EventLog(store), home, config)


def configured_runtime(log: EventLog, home: Path, config: LoomConfig) -> Runtime:
    """A runtime over ``log`` with ``config``'s servers, tool timeouts, shell options, models, advisor and loop.

    The one place a config becomes a runtime: the embedded default, the DBOS engine's face and its workers alike.
    """
    from orchestrator.runtime.runtime import Runtime

    return Runtime(
        log,
        home=home,
        servers=config.servers,
        tool_timeouts=config.tool_timeouts_s,
        shell=config.shell,
        profiles=config.profiles,
        warnings=config.ignored,
        model=config.model,
        advisor=config.advisor,
        loop=config.loop,
    )


async def find_run(home: Path, run_id: str, *, whole_session: bool = False) -> tuple[RunRecord, list[Event]] | None:
    """A run (by id or unique prefix) and its events (its whole session's with ``whole_session``), or None.

    The store is the one ``home``'s config chooses: the dbos engine's Postgres database, else ``home/loom.db``.

    Raises:
        orchestrator.store.peek.ReadFailed: the home's engine setting cannot be used.
        orchestrator.store.interface.StoreError: the store cannot be read.
    """
    location = _stored_at(home)
    if location is None:
        return None  # reading must not create an empty database
    async with CheckpointStore(location) as store:
        run = await store.get_run(run_id) or await store.find_run(run_id)
        if run is None:
            return None
        return run, await store.read_events(run.session_id, run_id=None if whole_session else run.id)


async def recent_runs(home: Path, limit: int) -> list[RunRecord]:
    """The most recent runs, newest first, from the store ``home``'s config chooses (as :func:`find_run`)."""
    location = _stored_at(home)
    if location is None:
        return []
    async with CheckpointStore(location) as store:
        return await store.list_runs(limit=limit)


def _stored_at(home: Path) -> Path | str | None:
    """The store to read ``home``'s runs from, or None when it is a SQLite file not made yet."""
    from orchestrator.store.peek import store_location

    location = store_location(home)
    return None if isinstance(location, Path) and not location.is_file() else location
