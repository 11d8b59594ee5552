"""The host's index of runs in progress: what "has this session a run going" reads, instead of every handle kept."""

from __future__ import annotations

import pytest

from orchestrator.runtime.host_runs import LiveRuns, RunHandle

pytestmark = pytest.mark.anyio


async def test_only_runs_not_done_count_and_in_the_order_they_started() -> None:
    live = LiveRuns()
    first, second, other = RunHandle("r_1", "s_a"), RunHandle("r_2", "s_a"), RunHandle("r_3", "s_b")
    for handle in (first, second, other):
        live.add(handle)
    assert live.of("s_a") == [first, second] and live.sessions() == {"s_a", "s_b"}
    first.done.set()  # done but not yet discarded (the host discards right after): already not in progress
    assert live.of("s_a") == [second]
    live.discard(first)
    live.discard(first)  # twice is harmless
    second.done.set()
    live.discard(second)
    assert live.of("s_a") == [] and live.sessions() == {"s_b"}


async def test_a_handle_replaced_under_the_same_id_is_not_dropped_by_the_old_one() -> None:
    # A resume makes a new handle under the run's own id; the old handle's end must not drop the new one.
    live = LiveRuns()
    old, new = RunHandle("r_1", "s_a"), RunHandle("r_1", "s_a")
    live.add(old)
    live.add(new)
    old.done.set()
    live.discard(old)
    assert live.of("s_a") == [new]
