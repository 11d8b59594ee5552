"""The face's orchestration tools over real child sessions: scripted planner, executors and reviewer, SQLite."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from clients.loom import FaceError, LoomClient
from orchestrator.agents.report import Report
from orchestrator.config import SessionLimits
from orchestrator.events import OrchestrationFinished, TaskStateChanged
from orchestrator.face.server import build_face
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.host import SessionHost
from orchestrator.runtime.idle import IDLE_GRACE_S
from tests.orchestrator.face.orchestration_support import FAIL, executor_turns, install_roles, log_lines

pytestmark = pytest.mark.anyio


@contextlib.asynccontextmanager
async def host_and_face(
    home: Path, limits: SessionLimits | None = None
) -> AsyncIterator[tuple[SessionHost, LoomClient]]:
    async with (
        embedded_runtime(home) as runtime,
        SessionHost(runtime, limits=limits, grace_s=0 if limits else IDLE_GRACE_S) as host,
        Client(build_face(host)) as client,
    ):
        yield host, LoomClient(client, on_daemon=False)


async def orchestrating(face: LoomClient, work: Path) -> str:
    session = await face.create_session(str(work), model="scripted:demo", mode="bypass", headless=True)
    return session.session_id


async def orchestrate(face: LoomClient, session_id: str, **kw: Any) -> Report:
    arguments = {"goal": "ship it", "max_parallel": 2, "task_timeout_s": 30, **kw}
    return await face.call("orchestrate", Report, session_id=session_id, **arguments)


async def until(face: LoomClient, session_id: str, check: Callable[[Report], bool]) -> Report:
    """The snapshot once ``check`` holds, re-read whenever the session's stream moves (bounded)."""
    after = 0
    with anyio.fail_after(30):
        while True:
            report = await face.call("get_orchestration", Report, session_id=session_id)
            if check(report):
                return report
            after = (await face.read_events(session_id, after_seq=after, wait_s=5)).next_after_seq


async def runs_begun(host: SessionHost, face: LoomClient, session_id: str, agent: str, count: int) -> None:
    """Wait until ``count`` runs of ``agent`` children are stored (each child's run begun), as the stream moves."""
    after = 0
    with anyio.fail_after(30):
        while True:
            kids = [s.session_id for s in await face.list_sessions() if s.agent == agent]
            if sum([len(await host.runtime.log.store.list_runs(sid)) for sid in kids]) >= count:
                return
            after = (await face.read_events(session_id, after_seq=after, wait_s=5)).next_after_seq


def states(report: Report) -> dict[str, str]:
    return {task.id: task.state for task in report.tasks}


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    home.mkdir()
    return home, work


async def test_orchestrate_answers_at_once_and_the_graph_is_planned_run_and_reviewed(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    home, work = dirs
    install_roles(home, tmp_path)
    async with host_and_face(home) as (host, face):
        session_id = await orchestrating(face, work)
        started = await orchestrate(face, session_id)
        assert started.status == "planning" and started.tasks == []  # answered before the planner ran
        done = await face.call(
            "get_orchestration", Report, session_id=session_id, orchestration_id=started.orchestration_id, wait_s=30
        )
        kids = [s for s in await face.list_sessions() if s.parent_session_id == session_id]
        events = await host.runtime.log.store.read_events(session_id)
    assert done.status == "passed", done.text()
    assert states(done) == {"a": "passed", "b": "passed", "c": "passed"}
    assert log_lines(work) == 3  # each executor's work ran once
    assert Counter(s.agent for s in kids) == {"planner": 1, "executor": 3, "reviewer": 3}
    moves = [(e.task_id, e.state) for e in events if isinstance(e, TaskStateChanged) and not e.child_session_id]
    assert ("c", "ready") in moves and ("c", "passed") in moves  # every transition is in the session's log
    assert [e.status for e in events if isinstance(e, OrchestrationFinished)] == ["passed"]
    assert "[passed] c: Sum up (after a, b)" in done.text()


async def test_a_rejected_task_is_retried_then_fails_and_blocks_only_its_dependants(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    home, work = dirs
    plan = {
        "tasks": [
            {"id": "a", "title": "A", "brief": "Append.", "criteria": ["a line"]},
            {"id": "c", "title": "C", "brief": "Append.", "depends_on": ["a"], "criteria": ["a line"]},
        ]
    }
    install_roles(home, tmp_path, plan=plan, reviewer=FAIL)
    async with host_and_face(home) as (_, face):
        session_id = await orchestrating(face, work)
        with anyio.fail_after(40):
            done = await orchestrate(face, session_id, max_attempts=2, wait_s=30)  # answers once it has ended
    assert done.status == "failed" and states(done) == {"a": "failed", "c": "blocked"}, done.text()
    [a] = [t for t in done.tasks if t.id == "a"]
    assert a.attempts == 2 and a.findings == ["log.txt:1: wrong line"]
    assert log_lines(work) == 2  # two attempts of a; c never ran


async def test_cancel_orchestration_ends_it_and_cancels_the_children_going(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    home, work = dirs
    install_roles(home, tmp_path, executor=executor_turns(delay_s=60))
    async with host_and_face(home) as (host, face):
        session_id = await orchestrating(face, work)
        await orchestrate(face, session_id)
        going = await until(face, session_id, lambda r: states(r).get("a") == "running" == states(r).get("b"))
        await runs_begun(host, face, session_id, "executor", 2)  # both executors are thinking
        with anyio.fail_after(20):
            cancelled = await face.call("cancel_orchestration", Report, session_id=session_id, reason="enough")
        executors = [s.session_id for s in await face.list_sessions() if s.agent == "executor"]
        runs = [run.status for sid in executors for run in await host.runtime.log.store.list_runs(sid)]
        with pytest.raises(FaceError, match="already ended cancelled"):
            await face.call("cancel_orchestration", Report, session_id=session_id)
    assert going.status == "running"
    assert cancelled.status == "cancelled" and set(states(cancelled).values()) == {"cancelled"}, cancelled.text()
    assert runs == ["cancelled", "cancelled"]  # both executors' runs, stopped with it
    assert log_lines(work) == 0


async def test_bad_requests_are_refused_in_the_callers_terms(dirs: tuple[Path, Path]) -> None:
    home, work = dirs
    async with host_and_face(home) as (_, face):
        session_id = await orchestrating(face, work)
        with pytest.raises(FaceError, match="the goal is empty"):
            await orchestrate(face, session_id, goal="  ")
        with pytest.raises(FaceError, match="no session 'nope'"):
            await orchestrate(face, "nope")
        with pytest.raises(FaceError, match="has no orchestration; start one with orchestrate"):
            await face.call("get_orchestration", Report, session_id=session_id)
        with pytest.raises(FaceError, match="max_parallel"):
            await orchestrate(face, session_id, max_parallel=0)
        with pytest.raises(FaceError, match="no orchestration 'orch_x'"):
            await face.call("get_orchestration", Report, session_id=session_id, orchestration_id="orch_x")
        assert await host_events_count(face, session_id) == 0  # nothing refused was recorded


async def host_events_count(face: LoomClient, session_id: str) -> int:
    page = await face.read_events(session_id)
    return sum(1 for e in page.events if e.type.startswith(("orchestration_", "task_")))


async def test_a_restarted_host_resumes_the_graph_without_starting_its_children_again(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    home, work = dirs
    install_roles(home, tmp_path, executor=executor_turns(delay_s=1.0))
    async with host_and_face(home) as (_, face):
        session_id = await orchestrating(face, work)
        started = await orchestrate(face, session_id)
        await until(face, session_id, lambda r: states(r).get("a") == "running" == states(r).get("b"))
    # The host closed with both executors in their first model call: their runs are interrupted, c is pending.
    async with host_and_face(home) as (host, face):
        assert await host.orchestrations.resume_unfinished() == [started.orchestration_id]
        done = await face.call("get_orchestration", Report, session_id=session_id, wait_s=40)
        kids = [s for s in await face.list_sessions() if s.parent_session_id == session_id]
    assert done.status == "passed", done.text()
    assert Counter(s.agent for s in kids) == {"planner": 1, "executor": 3, "reviewer": 3}  # none started twice
    assert log_lines(work) == 3


async def test_the_graph_goes_on_while_its_sessions_are_closed_as_idle(tmp_path: Path, dirs: tuple[Path, Path]) -> None:
    home, work = dirs
    install_roles(home, tmp_path)
    # One open session at most: the orchestrating session and each finished child are closed as soon as idle.
    async with host_and_face(home, SessionLimits(max_open=1)) as (_, face):
        session_id = await orchestrating(face, work)
        with anyio.fail_after(40):
            done = await orchestrate(face, session_id, wait_s=30)
        kids = [s for s in await face.list_sessions() if s.parent_session_id == session_id]
    assert done.status == "passed", done.text()
    assert Counter(s.agent for s in kids) == {"planner": 1, "executor": 3, "reviewer": 3}
    assert log_lines(work) == 3
