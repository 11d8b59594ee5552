"""Pins what :func:`orchestrator.engine.dbos_private.recover_executors` does on the installed DBOS, on a real Postgres.

Real executors in real processes: a toy DBOS app (``_toy_worker.py``) is SIGKILLed in the second step of a
workflow, and another executor recovers it by the dead executor's id. If a DBOS upgrade changes the private call
behind the wrapper, this test fails: the workflow is not recovered, a finished step runs again, or a workflow of
another application version is taken.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

TOY = Path(__file__).with_name("_toy_worker.py")
ROOT = Path(__file__).resolve().parents[3]


def toy(mode: str, url: str, tmp: Path, *args: str) -> list[str]:
    """The command line of one toy executor."""
    return [
        sys.executable,
        str(TOY),
        mode,
        "--url",
        url,
        "--log",
        str(tmp / "log"),
        "--block",
        str(tmp / "block"),
        *args,
    ]


def toy_env() -> dict[str, str]:
    """The environment a toy executor runs in: Loom importable, nothing of DBOS's own from ours."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DBOS")}
    env["PYTHONPATH"] = str(ROOT)
    return env


def steps(tmp: Path) -> list[tuple[str, str, str]]:
    """(step, workflow, executor) for every step execution the toy executors logged."""
    log = tmp / "log"
    if not log.exists():
        return []
    return [tuple(line.split()[:3]) for line in log.read_text().splitlines() if line.strip()]  # type: ignore[misc]


def wait_for(predicate: object, what: str, timeout: float = 30.0) -> None:
    """Poll ``predicate`` until it is true (bounded)."""
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.fixture
def executors() -> Iterator[list[subprocess.Popen[bytes]]]:
    """The toy processes a test starts; any still alive at the end are killed."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)


def test_a_dead_executors_workflow_is_finished_by_another_without_rerunning_its_finished_step(
    fresh_database: str, tmp_path: Path, executors: list[subprocess.Popen[bytes]]
) -> None:
    (tmp_path / "block").touch()
    for version, workflow in (("toy-1", "wf-mine"), ("toy-2", "wf-other-version")):
        executors.append(
            subprocess.Popen(
                toy(
                    "start",
                    fresh_database,
                    tmp_path,
                    "--executor",
                    "dead",
                    "--version",
                    version,
                    "--workflow",
                    workflow,
                ),
                env=toy_env(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
    wait_for(lambda: sum(s[0] == "second" for s in steps(tmp_path)) == 2, "both workflows to reach their second step")
    for proc in executors:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    (tmp_path / "block").unlink()

    done = subprocess.run(
        toy("recover", fresh_database, tmp_path, "--executor", "alive", "--version", "toy-1", "--dead", "dead")
        + ["--workflow", "wf-mine"],
        env=toy_env(),
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert out == [{"recovered": ["wf-mine"]}, {"result": "HI!"}, {"again": []}], done.stderr[-3000:]

    ran = steps(tmp_path)
    assert ran.count(("first", "wf-mine", "dead")) == 1
    assert not any(s[0] == "first" and s[2] == "alive" for s in ran), "a finished step ran again after recovery"
    assert ran.count(("second", "wf-mine", "alive")) == 1
    assert not any(s[1] == "wf-other-version" and s[2] == "alive" for s in ran)

    with psycopg.connect(fresh_database) as conn:
        rows: dict[str, str] = dict(
            conn.execute("SELECT workflow_uuid, status || ' ' || executor_id FROM dbos.workflow_status").fetchall()
        )
    assert rows == {"wf-mine": "SUCCESS alive", "wf-other-version": "PENDING dead"}


@pytest.mark.parametrize(
    ("stop", "takeover_s", "within_s"),
    [(signal.SIGKILL, 1.0, 2.5), (signal.SIGTERM, 5.0, 3.0)],
    ids=["killed: after the takeover delay", "stopped cleanly mid-run: at once"],
)
def test_a_pool_member_takes_over_a_stopped_members_run_through_the_wrapper(
    fresh_database: str,
    tmp_path: Path,
    executors: list[subprocess.Popen[bytes]],
    stop: signal.Signals,
    takeover_s: float,
    within_s: float,
) -> None:
    (tmp_path / "block").touch()
    timings = ["--heartbeat", "0.2", "--takeover", str(takeover_s)]
    for worker, workflow in (("w-dies", "wf-run"), ("w-lives", "")):
        executors.append(
            subprocess.Popen(
                toy("pool", fresh_database, tmp_path, "--executor", worker, "--workflow", workflow, *timings),
                env=toy_env(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        if workflow:  # the run must be the first worker's before the second joins
            wait_for(lambda: ("second", "wf-run", "w-dies") in steps(tmp_path), "the first worker's second step")
    wait_for(lambda: ("ready", "-", "w-lives") in steps(tmp_path), "the second worker to supervise")
    time.sleep(0.3)  # a beat or more since the first worker's last
    executors[0].send_signal(stop)
    stopped = time.time()
    executors[0].wait(timeout=30)
    (tmp_path / "block").unlink()
    wait_for(lambda: ("second", "wf-run", "w-lives") in steps(tmp_path), "the live worker's second step")
    resumed = next(
        float(line.split()[3])
        for line in (tmp_path / "log").read_text().splitlines()
        if line.startswith("second wf-run w-lives")
    )
    print(f"{stop.name} -> the other worker's next step: {resumed - stopped:.2f} s (takeover after {takeover_s:g} s)")
    assert resumed - stopped < within_s
    assert [s for s in steps(tmp_path) if s[0] == "first"] == [("first", "wf-run", "w-dies")]
    with psycopg.connect(fresh_database) as conn:
        wait_for(
            lambda: conn.execute("SELECT status FROM dbos.workflow_status").fetchall() == [("SUCCESS",)],
            "the run to finish",
        )


def test_an_executor_restarted_under_its_id_finishes_its_own_pending_workflow_at_launch(
    fresh_database: str, tmp_path: Path, executors: list[subprocess.Popen[bytes]]
) -> None:
    # What the pool relies on when a dead worker comes back before anyone took it over: DBOS's launch does it.
    (tmp_path / "block").touch()
    for workflow in ("wf-mine", ""):
        executors.append(
            subprocess.Popen(
                toy("start", fresh_database, tmp_path, "--executor", "w1", "--workflow", workflow),
                env=toy_env(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        if workflow:
            wait_for(lambda: ("second", "wf-mine", "w1") in steps(tmp_path), "the second step")
            executors[0].send_signal(signal.SIGKILL)
            executors[0].wait(timeout=10)
            (tmp_path / "block").unlink()
    wait_for(lambda: steps(tmp_path).count(("second", "wf-mine", "w1")) == 2, "the restarted executor's second step")
    assert steps(tmp_path).count(("first", "wf-mine", "w1")) == 1
