"""The face's runtime on the DBOS engine: the shared store, the feed from the workers, and the queue.

:func:`orchestrator.runtime.embedded.embedded_runtime` opens this one when the home's config chooses the dbos
engine, so that ``loom serve``, an embedded ``loom mcp`` and ``loom run`` all become faces over the shared database:
they create sessions and store messages there, and the runs go to the workers (``loom worker``).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.engine.errors import EngineError

if TYPE_CHECKING:
    from orchestrator.config import LoomConfig
    from orchestrator.runtime.runtime import Runtime


@contextlib.asynccontextmanager
async def distributed_runtime(home: Path, config: LoomConfig, *, shared: bool = False) -> AsyncIterator[Runtime]:
    """A runtime whose runs the workers drive (``config.engine`` must be the dbos engine).

    Raises:
        orchestrator.engine.errors.EngineError: the database or its queue cannot be reached.
        orchestrator.store.interface.StoreError: the store cannot be opened.
        orchestrator.runtime.lock.HomeInUse: another face holds ``home``.
    """
    from orchestrator.engine.face import remote_runs
    from orchestrator.engine.feed import FeedError, RemoteFeed
    from orchestrator.runtime.embedded import configured_runtime
    from orchestrator.runtime.lock import RuntimeLock
    from orchestrator.store.checkpoints import CheckpointStore
    from orchestrator.store.eventlog import EventLog

    settings = config.engine
    assert settings is not None and settings.distributed
    async with contextlib.AsyncExitStack() as stack:
        store = await stack.enter_async_context(CheckpointStore(settings.database))
        stack.enter_context(RuntimeLock(home, shared=shared))
        log = EventLog(store)
        try:
            await stack.enter_async_context(RemoteFeed(settings.database, log))
        except FeedError as exc:
            raise EngineError(str(exc)) from None
        runs = await stack.enter_async_context(remote_runs(settings, log))
        runtime = configured_runtime(log, home, config)
        runtime.remote = runs
        yield runtime
