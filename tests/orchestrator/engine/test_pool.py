"""The worker pool on a real Postgres: heartbeats, one takeover per silent worker, clean stops, ids held once.

Live workers are pools in this process; the worker that dies is a real process (``_toy_worker.py beat``) that is
SIGKILLed, or SIGSTOPped to play a worker that pauses past its takeover delay and then wakes up.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import anyio
import pytest

from orchestrator.engine.pool import PoolError, WorkerIdInUse, WorkerPool, connect
from orchestrator.engine.pool_listing import list_workers

pytestmark = pytest.mark.anyio

TOY = Path(__file__).with_name("_toy_worker.py")
ROOT = Path(__file__).resolve().parents[3]
BEAT, TAKEOVER = 0.2, 1.0


class Recorder:
    """A pool's ``recover``: remembers who was asked to recover whom, and when."""

    def __init__(self, calls: list[tuple[str, list[str], float]], me: str) -> None:
        self.calls, self.me = calls, me

    async def __call__(self, ids: Sequence[str]) -> list[str]:
        self.calls.append((self.me, list(ids), time.monotonic()))
        return ["run-1"]


@asynccontextmanager
async def pools(url: str, ids: Sequence[str], calls: list[tuple[str, list[str], float]]) -> AsyncIterator[None]:
    """Live pools named ``ids`` in this process, all recording into ``calls``."""
    async with AsyncExitStack() as stack:
        for worker in ids:
            pool = WorkerPool(url, worker, heartbeat_s=BEAT, takeover_after_s=TAKEOVER, recover=Recorder(calls, worker))
            await stack.enter_async_context(pool)
        yield


@pytest.fixture
def beating() -> Iterator[list[subprocess.Popen[str]]]:
    """Beat-only worker processes a test starts; any left are killed."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
        proc.communicate(timeout=10)


def start_beating(url: str, worker: str, started: list[subprocess.Popen[str]]) -> subprocess.Popen[str]:
    """A worker process that only beats; returns once it has joined the pool."""
    proc = subprocess.Popen(
        [sys.executable, str(TOY), "beat", "--url", url, "--executor", worker, "--heartbeat", str(BEAT)]
        + ["--takeover", str(TAKEOVER)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    started.append(proc)
    assert proc.stdout is not None
    assert json.loads(proc.stdout.readline()) == {"ready": True}
    return proc


async def wait_until(predicate: Callable[[], object], timeout: float = 10.0) -> None:
    """Poll ``predicate`` until it is true (bounded)."""
    with anyio.fail_after(timeout):
        while True:  # polled: what it watches is appended to by the pools' tasks
            if predicate():
                return
            await anyio.sleep(0.05)


async def test_a_killed_worker_is_taken_over_once_by_one_live_worker_and_its_id_can_come_back(
    fresh_database: str, beating: list[subprocess.Popen[str]]
) -> None:
    calls: list[tuple[str, list[str], float]] = []
    dead = start_beating(fresh_database, "w-dead", beating)
    async with pools(fresh_database, ["w-a", "w-b"], calls):
        dead.kill()
        killed = time.monotonic()
        await wait_until(lambda: calls)
        await anyio.sleep(TAKEOVER + 2 * BEAT)  # time enough for a second takeover, or one of a beating worker
        assert [(me in ("w-a", "w-b"), ids) for me, ids, _ in calls] == [(True, ["w-dead"])]
        assert calls[0][2] - killed < TAKEOVER + 1.5  # silent for TAKEOVER, then the next check (every BEAT)
        by = {w.id: w for w in await list_workers(fresh_database)}
        assert (by["w-dead"].state, by["w-dead"].taken_over_by) == ("taken over", calls[0][0])
        assert by["w-a"].state == by["w-b"].state == "running" and by["w-a"].beat_age_s < TAKEOVER

        # A worker restarted under the dead id takes it back, and nobody takes it over again.
        async with pools(fresh_database, ["w-dead"], calls):
            back = {w.id: w for w in await list_workers(fresh_database)}["w-dead"]
            assert (back.state, back.taken_over_by, back.pid) == ("running", None, os.getpid())
            await anyio.sleep(TAKEOVER + 2 * BEAT)
        assert len(calls) == 1


async def test_a_worker_restarted_under_an_id_being_taken_over_waits_for_the_takeover_to_finish(
    fresh_database: str, beating: list[subprocess.Popen[str]]
) -> None:
    asked, release = anyio.Event(), anyio.Event()

    async def slow_recover(ids: Sequence[str]) -> list[str]:
        asked.set()
        await release.wait()
        return ["run-1"]

    dead = start_beating(fresh_database, "w1", beating)
    restarted = anyio.Event()

    async def restart() -> None:
        async with pools(fresh_database, ["w1"], []):
            restarted.set()

    taker = WorkerPool(fresh_database, "w-a", heartbeat_s=BEAT, takeover_after_s=TAKEOVER, recover=slow_recover)
    async with taker, anyio.create_task_group() as group:
        dead.kill()
        with anyio.fail_after(10):
            await asked.wait()
        group.start_soon(restart)
        await anyio.sleep(3 * BEAT)
        assert not restarted.is_set(), "the id came back while its runs were being re-enqueued"
        release.set()
        with anyio.fail_after(5):
            await restarted.wait()


async def test_a_clean_stop_is_never_taken_over(fresh_database: str) -> None:
    calls: list[tuple[str, list[str], float]] = []
    async with pools(fresh_database, ["w-a"], calls):
        async with pools(fresh_database, ["w-b"], calls):
            await anyio.sleep(BEAT)
        await anyio.sleep(TAKEOVER + 3 * BEAT)
        assert calls == []
        states = {w.id: w.state for w in await list_workers(fresh_database)}
    assert states == {"w-a": "running", "w-b": "stopped"}
    assert {w.id: w.state for w in await list_workers(fresh_database)} == {"w-a": "stopped", "w-b": "stopped"}


async def test_an_id_a_live_worker_holds_is_refused(fresh_database: str) -> None:
    calls: list[tuple[str, list[str], float]] = []
    async with pools(fresh_database, ["w1"], calls):
        with pytest.raises(WorkerIdInUse) as refused:
            async with pools(fresh_database, ["w1"], calls):
                pass  # pragma: no cover - refused on entry
        assert str(refused.value) == (
            f"a worker named w1 is already running on {socket.gethostname()} (pid {os.getpid()}); pick another --id"
        )
    async with pools(fresh_database, ["w1"], calls):  # once it stopped, the id is free again
        pass


async def test_a_worker_that_wakes_up_taken_over_stops_instead_of_driving_runs_twice(
    fresh_database: str, beating: list[subprocess.Popen[str]]
) -> None:
    calls: list[tuple[str, list[str], float]] = []
    paused = start_beating(fresh_database, "w-paused", beating)
    async with pools(fresh_database, ["w-a"], calls):
        os.kill(paused.pid, signal.SIGSTOP)
        await wait_until(lambda: calls)
        os.kill(paused.pid, signal.SIGCONT)
        out, _ = await anyio.to_thread.run_sync(lambda: paused.communicate(timeout=10))
    assert paused.returncode == 3
    assert json.loads(out.strip().splitlines()[-1]) == {
        "error": "worker w-paused was silent for longer than 1 s and w-a took over its runs; it stops so that no run "
        "is driven twice (start it again to rejoin the pool)"
    }


async def test_two_workers_stalled_together_do_not_take_each_other_over(fresh_database: str) -> None:
    # A loaded machine stalls both workers: each beat's row goes stale while each process's own clock says it beat
    # a moment ago (a beat is stamped when its statement starts, however late it commits). Neither may claim the
    # other, or both stop and no one drives their runs; once one beats again, it alone takes the other over.
    calls: list[tuple[str, list[str], float]] = []
    a = WorkerPool(fresh_database, "w-a", heartbeat_s=60, takeover_after_s=TAKEOVER, recover=Recorder(calls, "w-a"))
    b = WorkerPool(fresh_database, "w-b", heartbeat_s=60, takeover_after_s=TAKEOVER, recover=Recorder(calls, "w-b"))
    conn = await connect(fresh_database)
    try:
        async with a, b:
            await conn.execute("UPDATE loom_engine.workers SET beat = now() - interval '5 seconds'")
            assert await a.take_over_silent() == [] and await b.take_over_silent() == []
            await conn.execute("UPDATE loom_engine.workers SET beat = now() WHERE id = 'w-a'")
            assert await b.take_over_silent() == []
            assert await a.take_over_silent() == ["w-b"]
            assert await b.take_over_silent() == []
            by = {w.id: w for w in await list_workers(fresh_database)}
            assert (by["w-a"].taken_over_by, by["w-b"].taken_over_by) == (None, "w-a")
    finally:
        await conn.close()
    assert [(me, ids) for me, ids, _ in calls] == [("w-a", ["w-b"])]


async def test_an_unreachable_database_is_a_clear_error_that_hides_the_password() -> None:
    with pytest.raises(PoolError) as failed:
        await list_workers("postgresql://loom:s3cret@127.0.0.1:1/loom")
    message = str(failed.value)
    assert message.startswith("cannot reach the engine database postgresql://loom:***@127.0.0.1:1/loom: ")
    assert "s3cret" not in message and "check that Postgres is running" in message


async def test_no_workers_before_any_joined(fresh_database: str) -> None:
    assert await list_workers(fresh_database) == []
