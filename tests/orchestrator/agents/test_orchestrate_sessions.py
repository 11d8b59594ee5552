"""The controller over real child sessions: Loom's face in-process, scripted models for every role, SQLite."""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from clients.loom import FaceError, LoomClient
from orchestrator.agents.children import ChildError, ChildHandle, ChildSpec, FaceChildren
from orchestrator.agents.graph import fold
from orchestrator.agents.orchestrate import Limits, Orchestrator
from orchestrator.agents.report import unfinished
from orchestrator.agents.roles import BUILTIN_DIR, ROLES
from orchestrator.events import Event, TaskStateChanged
from orchestrator.face.server import build_face
from orchestrator.protocol import SessionInfo
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.host import SessionHost

pytestmark = pytest.mark.anyio

PLAN = {
    "tasks": [
        {"id": "a", "title": "A", "brief": "Write a.txt.", "criteria": ["a.txt exists"]},
        {"id": "b", "title": "B", "brief": "Write b.txt.", "criteria": ["b.txt exists"]},
        {"id": "c", "title": "C", "brief": "Summarise.", "depends_on": ["a", "b"], "criteria": ["a summary"]},
    ]
}
VERDICT = '```json\n{"verdict": "pass", "findings": []}\n```'


def scripts(tmp_path: Path, executor_delay_s: float = 0.0) -> dict[str, str]:
    """A scripted model spec per role: the planner writes PLAN, executors write a file, reviewers pass."""
    turns: Mapping[str, Sequence[Mapping[str, Any]]] = {
        "planner": [{"text": "Here is the plan.\n```json\n" + json.dumps(PLAN) + "\n```"}],
        "executor": [
            {
                "delay_s": executor_delay_s,
                "tool_calls": [{"name": "fs__write", "arguments": {"path": "out.txt", "content": "done"}}],
            },
            {"text": "Wrote out.txt and checked it."},
        ],
        "reviewer": [{"text": "All criteria hold.\n" + VERDICT}],
    }
    specs = {}
    for role, script in turns.items():
        path = tmp_path / f"{role}.json"
        path.write_text(json.dumps({"turns": script}))
        specs[role] = f"scripted:{path}"
    return specs


@contextlib.asynccontextmanager
async def loom(tmp_path: Path) -> AsyncIterator[tuple[SessionHost, LoomClient, SessionInfo]]:
    home = tmp_path / "home"
    (home / "agents").mkdir(parents=True)
    for role in ROLES:  # the built-in roles, as a user's definitions: the face resolves agents from there
        (home / "agents" / f"{role}.md").write_text((BUILTIN_DIR / f"{role}.md").read_text())
    (tmp_path / "work").mkdir()
    async with embedded_runtime(home) as runtime, SessionHost(runtime) as host:
        async with Client(build_face(host)) as client:
            face = LoomClient(client, on_daemon=False)
            parent = await face.create_session(
                str(tmp_path / "work"), model="scripted:demo", mode="accept-edits", headless=True
            )
            yield host, face, parent


def children_for(host: SessionHost, face: LoomClient, parent: SessionInfo, tmp_path: Path, **kw: Any) -> FaceChildren:
    async def append(events: Sequence[Event]) -> None:
        await host.runtime.log.append(*events)

    return FaceChildren(face, parent.session_id, append, models=scripts(tmp_path, **kw), refusals=(FaceError,))


async def stored(host: SessionHost, session_id: str) -> list[Event]:
    return list(await host.runtime.log.store.read_events(session_id))


async def test_a_goal_is_planned_run_and_reviewed_by_child_sessions(tmp_path: Path) -> None:
    async with loom(tmp_path) as (host, face, parent):
        orchestrator = Orchestrator(children_for(host, face, parent, tmp_path), parent.session_id)
        with anyio.fail_after(60):
            result = await orchestrator.run("ship the feature", Limits(max_parallel=2, task_timeout_s=30))
        sessions = await face.list_sessions()
        events = await stored(host, parent.session_id)
    assert result.status == "passed", result.text()
    assert [t.id for t in result.tasks] == ["a", "b", "c"] and {t.state for t in result.tasks} == {"passed"}
    kids = [s for s in sessions if s.parent_session_id == parent.session_id]
    assert Counter(s.agent for s in kids) == {"planner": 1, "executor": 3, "reviewer": 3}
    assert (tmp_path / "work" / "out.txt").read_text() == "done"
    # The graph is in the parent's own log, and its fold is the report.
    assert fold(events, result.orchestration_id).counts() == {"passed": 3}
    assert unfinished(events) == []
    running = {
        e.task_id: e.child_session_id for e in events if isinstance(e, TaskStateChanged) and e.state == "running"
    }
    assert set(running) == {"a", "b", "c"} and set(running.values()) <= {s.session_id for s in kids}


async def test_a_resumed_controller_waits_for_the_child_it_started_and_reruns_nothing(tmp_path: Path) -> None:
    async with loom(tmp_path) as (host, face, parent):
        children = children_for(host, face, parent, tmp_path, executor_delay_s=0.5)
        limits = Limits(max_parallel=2, task_timeout_s=30)
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: Orchestrator(children, parent.session_id).run("ship it", limits))
                while True:  # the store is the only place to see it: poll, bounded by fail_after
                    events = await stored(host, parent.session_id)
                    if any(isinstance(e, TaskStateChanged) and e.state == "running" for e in events):
                        break
                    await anyio.sleep(0.02)
                tg.cancel_scope.cancel()  # the controller stops while two executors' runs go on
            events = await stored(host, parent.session_id)
            [oid] = unfinished(events)
            result = await Orchestrator(children, parent.session_id).resume(events, oid)
        sessions = await face.list_sessions()
    assert result.status == "passed", result.text()
    kids = [s for s in sessions if s.parent_session_id == parent.session_id]
    assert Counter(s.agent for s in kids) == {"planner": 1, "executor": 3, "reviewer": 3}  # none started twice


async def test_after_loom_restarts_the_interrupted_children_are_resumed_not_started_again(tmp_path: Path) -> None:
    limits = Limits(max_parallel=2, task_timeout_s=30)
    async with loom(tmp_path) as (host, face, parent):
        children = children_for(host, face, parent, tmp_path, executor_delay_s=1.0)
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: Orchestrator(children, parent.session_id).run("ship it", limits))
                while True:
                    events = await stored(host, parent.session_id)
                    started = [e for e in events if isinstance(e, TaskStateChanged) and e.state == "running"]
                    if len([e for e in started if e.child_run_id]) == 2:
                        break
                    await anyio.sleep(0.02)
                tg.cancel_scope.cancel()
    # Loom stopped with two executors mid-run: their runs are recorded interrupted. A new host, no autoResume.
    async with (
        embedded_runtime(tmp_path / "home") as runtime,
        SessionHost(runtime) as host,
        Client(build_face(host)) as client,
    ):
        face = LoomClient(client, on_daemon=False)
        events = await stored(host, parent.session_id)
        [oid] = unfinished(events)
        with anyio.fail_after(60):
            result = await Orchestrator(children_for(host, face, parent, tmp_path), parent.session_id).resume(
                events, oid
            )
        kids = [s for s in await face.list_sessions() if s.parent_session_id == parent.session_id]
    assert result.status == "passed", result.text()
    assert Counter(s.agent for s in kids) == {"planner": 1, "executor": 3, "reviewer": 3}


async def test_the_face_adapter_finds_a_started_run_again_and_reports_refusals_as_child_errors(tmp_path: Path) -> None:
    async with loom(tmp_path) as (host, face, parent):
        children = children_for(host, face, parent, tmp_path)
        spec = ChildSpec(agent="executor", goal="Write out.txt.", timeout_s=30, label="o/a/1/executor")
        session_id = await children.create(spec)
        assert await children.find_run(session_id) is None  # created, never started: nothing ran
        run_id = await children.start(session_id, spec)
        assert await children.find_run(session_id) == run_id
        with anyio.fail_after(30):
            outcome = await children.wait(ChildHandle(session_id, run_id), 30)
        assert outcome is not None and (outcome.status, outcome.final_text) == (
            "completed",
            "Wrote out.txt and checked it.",
        )
        with pytest.raises(ChildError, match="no agent definition named 'ghost'"):
            await children.create(ChildSpec(agent="ghost", goal="x", timeout_s=5, label="o/b/1/ghost"))
