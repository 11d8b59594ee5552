"""Smoke tests of benchmarks/engine.py: the arithmetic of its figures, and (``--long``) the whole group in quick mode.

The whole group starts its own Postgres cluster, five ``loom worker`` processes and SIGKILLs one: 75-100 s on
2 cores, so it runs in long mode only (``pytest --long`` or ``LOOM_LONG_TESTS=1``).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

from benchmarks import engine
from orchestrator.events import Event, ToolCallFinished, UserMessage
from tests.pg import postgres_bin_dir


def _finished(run_id: str, ts: float) -> ToolCallFinished:
    return ToolCallFinished(
        session_id="s",
        run_id=run_id,
        step=1,
        call_id=f"c{ts}",
        tool="fs__read",
        is_error=False,
        content="x",
        duration_ms=1.0,
        ts=ts,
    )


def test_a_step_is_the_time_between_two_stored_results_of_its_own_run() -> None:
    events: list[Event] = [
        UserMessage(session_id="s", run_id="r1", text="go", ts=0.5),
        _finished("r1", 1.0),
        _finished("r2", 1.01),  # another run's result in between is not a step of this one
        _finished("r1", 1.25),
        _finished("r1", 1.75),
    ]
    assert engine.step_times(events, "r1") == [0.25, 0.5]
    assert engine.step_times(events, "r2") == []


def test_the_breakdown_counts_dbos_steps_per_loop_step_and_the_gaps_between_them() -> None:
    rows = [("loom.model", 0, 2), ("loom.journal", 3, 5), ("loom.tool", 9, 10), ("loom.model", 12, 13)]
    text = engine.step_breakdown(rows, 1)  # one tool step and the final answer: two loop steps
    assert "DBOS steps per loop step (last run, from dbos.operation_outputs): 2.0:" in text
    assert "1.0 loom.model (1.50 ms)" in text and "0.5 loom.journal (1.00 ms)" in text
    assert text.endswith(" 3.50 ms"), text  # gaps of 1, 4 and 2 ms over two loop steps


def test_the_engine_group_measures_its_three_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest
) -> None:
    if not (request.config.getoption("--long") or os.environ.get("LOOM_LONG_TESTS") == "1"):
        pytest.skip("long mode only (pytest --long): 75-100 s of Postgres and worker processes")
    if postgres_bin_dir() is None:
        pytest.skip("Postgres is not installed (apt-get install postgresql); the engine benchmarks need it")
    figures = engine.measure(tmp_path, quick=True)
    assert [f.key for f in figures] == ["engine_step", "engine_throughput", "engine_takeover"]
    step, throughput, takeover = figures
    assert len(step.data["dbos_step_s"]) == 3 and all(s > 0 for s in step.data["embedded_step_s"])
    assert {name for name, _, _ in step.data["dbos_steps"]} >= {"loom.model", "loom.tool", "loom.journal"}
    assert throughput.miss_reason is None and math.isfinite(throughput.ratio)
    (kill,) = takeover.data["kills"]
    assert 0 < kill["notice_s"] <= kill["next_step_s"] < 30, kill
    assert "skipped" not in capsys.readouterr().out
