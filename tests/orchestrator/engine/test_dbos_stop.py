"""Pins :func:`orchestrator.engine.dbos_private.stop_dequeuing` on the installed DBOS: nothing more is dequeued,
and what already runs goes on with the system database (a stopping worker counts what it holds, then leaves)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from dbos import DBOS, DBOSConfig, SetWorkflowID

from orchestrator.engine.dbos_private import stop_dequeuing

pytestmark = pytest.mark.anyio

_release = anyio.Event()


@DBOS.step()
async def _hold() -> str:
    await _release.wait()
    return "held"


@DBOS.workflow(name="stop_pin_workflow")
async def _workflow(n: int) -> str:
    return f"{n}:{await _hold()}"


async def test_after_stop_dequeuing_queued_runs_stay_queued_and_running_ones_finish(tmp_path: Path) -> None:
    global _release
    _release = anyio.Event()
    config: DBOSConfig = {
        "name": "stop-pin",
        "system_database_url": f"sqlite:///{tmp_path / 'dbos.sqlite'}",
        "executor_id": "pin",
        "log_level": "WARNING",
    }
    DBOS(config=config)
    try:
        DBOS.launch()
        queue = await DBOS.register_queue_async("pin-runs", polling_interval_sec=0.05)
        with SetWorkflowID("running"):
            running = await queue.enqueue_async(_workflow, 1)
        with anyio.fail_after(20):
            while True:
                if (await running.get_status()).status == "PENDING":
                    break
                await anyio.sleep(0.05)
        stop_dequeuing()
        await anyio.sleep(0.3)  # a poll already under way finishes
        with SetWorkflowID("queued"):
            queued = await queue.enqueue_async(_workflow, 2)
        await anyio.sleep(1.0)
        assert (await queued.get_status()).status == "ENQUEUED"
        _release.set()
        with anyio.fail_after(20):
            assert await running.get_result() == "1:held"
    finally:
        _release.set()
        await anyio.to_thread.run_sync(lambda: DBOS.destroy(destroy_registry=False))
