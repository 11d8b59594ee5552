"""A test-only DBOS app, run as a real subprocess: one queued workflow of two steps, the second of which blocks.

``start``: launch as executor ``--executor`` and enqueue workflow ``--workflow`` on queue ``toy-runs``; it runs here
until the test SIGKILLs this process while step two waits for ``--block`` to disappear. ``recover``: launch as
another executor, call :func:`orchestrator.engine.dbos_private.recover_executors` on ``--dead``, print the ids it
returned (one JSON line), then wait for ``--workflow`` to finish, print its result, and recover again.

``pool``: join a :class:`~orchestrator.engine.pool.WorkerPool` (whose supervisor recovers dead workers), log
``ready`` and serve until SIGTERM (a clean stop) or SIGKILL; with ``--workflow`` it also enqueues that workflow
first. ``beat``: a pool member without DBOS, which only beats (and prints the pool's error if it finds itself taken
over). Every step appends ``STEP WORKFLOW EXECUTOR TIME`` to ``--log``, which is how the tests count executions.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections.abc import Sequence

import anyio
from dbos import DBOS, DBOSConfig, SetWorkflowID, WorkflowHandleAsync

QUEUE = "toy-runs"
_args: argparse.Namespace


def _log(step: str, workflow: str | None = None) -> None:
    workflow = workflow or DBOS.workflow_id or "?"
    with open(_args.log, "a", encoding="utf-8") as f:
        f.write(f"{step} {workflow} {_args.executor} {time.time():.6f}\n")


@DBOS.step()
async def first(text: str) -> str:
    """The step that must not run again after a takeover."""
    _log("first")
    return text.upper()


@DBOS.step()
async def second(text: str) -> str:
    """Blocks while the block file exists (the dead executor is killed here)."""
    _log("second")
    while True:  # polled: the test removes the file from another process
        if not await anyio.Path(_args.block).exists():
            return text + "!"
        await anyio.sleep(0.05)


@DBOS.workflow()
async def toy_run(text: str) -> str:
    """Two steps; the workflow's result is both of them."""
    return await second(await first(text))


def _launch() -> None:
    config: DBOSConfig = {
        "name": "loom-toy",
        "system_database_url": _args.url,
        "application_version": _args.version,
        "executor_id": _args.executor,
        "log_level": "WARNING",
        "notification_listener_polling_interval_sec": 0.1,
    }
    DBOS(config=config)
    DBOS.launch()


async def _enqueue() -> None:
    queue = await DBOS.register_queue_async(QUEUE, worker_concurrency=2, polling_interval_sec=0.1)
    if _args.workflow:
        with SetWorkflowID(_args.workflow):
            await queue.enqueue_async(toy_run, "hi")


async def _start() -> None:
    await anyio.to_thread.run_sync(_launch)
    await _enqueue()
    print(json.dumps({"ready": True}), flush=True)
    await anyio.sleep_forever()


async def _recover() -> None:
    from orchestrator.engine.dbos_private import recover_executors

    await anyio.to_thread.run_sync(_launch)
    await DBOS.register_queue_async(QUEUE, worker_concurrency=2, polling_interval_sec=0.1)
    recovered = await anyio.to_thread.run_sync(recover_executors, [_args.dead])
    print(json.dumps({"recovered": recovered}), flush=True)
    handle: WorkflowHandleAsync[str] = await DBOS.retrieve_workflow_async(_args.workflow)
    with anyio.fail_after(30):
        result = await handle.get_result()
    print(json.dumps({"result": result}), flush=True)
    # A second recovery of the same executor finds nothing: the workflow now belongs to this one.
    again = await anyio.to_thread.run_sync(recover_executors, [_args.dead])
    print(json.dumps({"again": again}), flush=True)


async def _pool() -> None:
    from orchestrator.engine.dbos_private import recover_executors
    from orchestrator.engine.pool import WorkerPool

    async def recover(ids: Sequence[str]) -> list[str]:
        return await anyio.to_thread.run_sync(recover_executors, ids)

    pool = WorkerPool(
        _args.url,
        _args.executor,
        heartbeat_s=_args.heartbeat,
        takeover_after_s=_args.takeover,
        recover=recover,
        version=_args.version,
        supervise=False,
    )
    async with pool:
        await anyio.to_thread.run_sync(_launch)
        try:
            await _enqueue()
            pool.start_supervising()
            _log("ready", "-")
            with anyio.open_signal_receiver(signal.SIGTERM) as signals:
                async for _ in signals:
                    break  # a clean stop: DBOS goes first, then the pool is left, as `loom worker` does
        finally:
            await anyio.to_thread.run_sync(DBOS.destroy)


async def _beat() -> None:
    from orchestrator.engine.pool import PoolError, WorkerPool

    async def recover(ids: Sequence[str]) -> list[str]:
        raise AssertionError(f"the beat-only toy recovers nothing, asked for {list(ids)}")

    try:
        async with WorkerPool(
            _args.url, _args.executor, heartbeat_s=_args.heartbeat, takeover_after_s=_args.takeover, recover=recover
        ):
            print(json.dumps({"ready": True}), flush=True)
            await anyio.sleep_forever()
    except PoolError as exc:
        print(json.dumps({"error": str(exc)}), flush=True)
        os._exit(3)


def main(argv: Sequence[str]) -> None:
    """Parse the arguments and run the mode."""
    global _args
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["start", "recover", "pool", "beat"])
    parser.add_argument("--url", required=True)
    parser.add_argument("--executor", required=True)
    parser.add_argument("--version", default="toy-1")
    parser.add_argument("--workflow", default="")
    parser.add_argument("--dead", default="")
    parser.add_argument("--log", default=os.devnull)
    parser.add_argument("--block", default="")
    parser.add_argument("--heartbeat", type=float, default=0.2)
    parser.add_argument("--takeover", type=float, default=1.0)
    _args = parser.parse_args(argv)
    modes = {"start": _start, "recover": _recover, "pool": _pool, "beat": _beat}
    try:
        anyio.run(modes[_args.mode])
    finally:
        DBOS.destroy()
    os._exit(0)  # DBOS's background threads must not hold the process open


if __name__ == "__main__":
    main(sys.argv[1:])
