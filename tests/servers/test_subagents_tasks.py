"""spawn and send answered with the face's MCP task (SEP-2663), over raw 2026-07-28 JSON-RPC.

The subagents server is served over real HTTP (the daemon's app, real uvicorn) and bound in-process to a real face
over a real runtime; children run scripted models.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.types import RequestParams, Result
from mcp_types import Request
from pydantic import ConfigDict, Field

from clients.loom import open_client
from orchestrator.face.server import build_face
from orchestrator.face.tasks import IDENTIFIER
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.host import SessionHost
from servers.subagents import build_server, in_process
from servers.subagents._tasks import FaceTask, TaskResults
from tests.clients.cli_support import clean_env, loom_command, make_project, write_script
from tests.orchestrator.daemon.daemon_process import http, running_daemon
from tests.orchestrator.daemon.served_app import served
from tests.orchestrator.face.test_face_tasks import Raw

pytestmark = pytest.mark.anyio

TOKEN = "subagents-tasks-token"
FINISHED = ["completed", "failed", "cancelled"]


class _TaskId(RequestParams):
    task_id: str = Field(alias="taskId")


class _Any(Result):
    model_config = ConfigDict(extra="allow")


@contextlib.asynccontextmanager
async def subagents_over_http(tmp_path: Path, *, tasks: bool = True) -> AsyncIterator[tuple[Raw, SessionHost]]:
    """A raw client of the subagents server (declaring the extension by default), and the host under its face.

    ``tasks``: the server is given a face connection declaring the extension (a session's hub gives none).
    """
    project = tmp_path / "p"
    project.mkdir()
    async with embedded_runtime(tmp_path / "home") as runtime, SessionHost(runtime) as host:
        face = build_face(host)
        server = build_server(
            in_process(lambda: face),
            session_id=None,
            cwd=project,
            home=tmp_path / "home",
            project=project,
            tasks=in_process(lambda: face, tasks=True) if tasks else None,
        )
        async with served(server, TOKEN) as origin, http(TOKEN) as client:
            yield Raw(client, f"{origin}/mcp", {"extensions": {IDENTIFIER: {}}}), host


def script(tmp_path: Path, turns: Sequence[Mapping[str, Any]]) -> str:
    path = tmp_path / "child.json"
    path.write_text(json.dumps({"turns": list(turns)}))
    return f"scripted:{path}"


async def test_spawn_is_a_task_polled_to_the_childs_result(tmp_path: Path) -> None:
    async with subagents_over_http(tmp_path) as (raw, host):
        model = script(tmp_path, [{"text": "the child's answer", "delay_s": 0.3}])
        created = await raw.tool("spawn", goal="answer", model=model)
        done = await raw.poll(created["taskId"], FINISHED)
        run_id = done["result"]["structuredContent"]["run_id"]
        state = await raw.plain("result", child_id=done["result"]["structuredContent"]["session_id"])
        stored = await host.runtime.log.store.get_run(run_id)
    assert created["resultType"] == "task" and created["status"] == "working"
    assert {"result", "inputRequests", "error"}.isdisjoint(created)
    assert done["status"] == "completed"
    assert done["result"]["structuredContent"]["final_text"] == "the child's answer"
    # The task is the child's run, and the server tracks the child as a spawn's: result reports on it.
    assert stored is not None and stored.session_id == state["child_id"]
    assert state["status"] == "completed" and state["run_id"] == run_id


async def test_cancelling_the_task_cancels_the_childs_run(tmp_path: Path) -> None:
    async with subagents_over_http(tmp_path) as (raw, host):
        created = await raw.tool("spawn", goal="take long", model=script(tmp_path, [{"text": "late", "delay_s": 60}]))
        assert created["resultType"] == "task"
        await raw.result("tasks/cancel", {"taskId": created["taskId"]})
        done = await raw.poll(created["taskId"], FINISHED)
        run = await host.view(created["taskId"].rpartition(".")[0])
    assert done["status"] == "cancelled"
    assert run.status == "cancelled"


async def test_send_is_a_task_for_the_follow_up_run(tmp_path: Path) -> None:
    async with subagents_over_http(tmp_path) as (raw, _host):
        model = script(tmp_path, [{"text": "first"}, {"text": "second"}])
        first = await raw.poll((await raw.tool("spawn", goal="one", model=model))["taskId"], FINISHED)
        child_id = first["result"]["structuredContent"]["session_id"]
        created = await raw.tool("send", child_id=child_id, message="and then?")
        done = await raw.poll(created["taskId"], FINISHED)
        state = await raw.plain("result", child_id=child_id)
    assert created["resultType"] == "task" and created["taskId"] != first["taskId"]
    assert done["status"] == "completed" and done["result"]["structuredContent"]["final_text"] == "second"
    assert state["run_id"] == done["result"]["structuredContent"]["run_id"]  # send tracked the follow-up run


async def test_without_the_extension_spawn_answers_as_today(tmp_path: Path) -> None:
    async with subagents_over_http(tmp_path) as (raw, _host):
        model = script(tmp_path, [{"text": "done"}])
        plain = await raw.tool("spawn", caps={}, goal="answer", model=model)
        other = await raw.tool("spawn", caps={"extensions": {"com.example/other": {}}}, goal="answer", model=model)
    for answer in (plain, other):
        assert answer["resultType"] == "complete" and "taskId" not in answer
        handle = answer["structuredContent"]
        assert handle["child_id"].startswith("s") and handle["run_id"] and handle["status"] in ("queued", "running")


async def test_an_unknown_task_is_the_faces_invalid_params(tmp_path: Path) -> None:
    async with subagents_over_http(tmp_path) as (raw, _host):
        answer = await raw.rpc("tasks/get", {"taskId": "r_nothing.forged"})
    assert answer["error"]["code"] == -32602 and "r_nothing.forged" in answer["error"]["message"]


async def test_a_server_without_a_declaring_face_connection_never_answers_with_a_task(tmp_path: Path) -> None:
    # As a session's hub builds it: a model's spawn is a spawn, whatever the request declares.
    async with subagents_over_http(tmp_path, tasks=False) as (raw, _host):
        answer = await raw.tool("spawn", goal="answer", model=script(tmp_path, [{"text": "done"}]))
        discovered = await raw.result("server/discover", {})
    assert answer["resultType"] == "complete" and answer["structuredContent"]["run_id"]
    assert IDENTIFIER not in (discovered["capabilities"].get("extensions") or {})


class _Get(Request[_TaskId, str]):
    name_param = "taskId"


async def test_loom_server_subagents_on_a_daemon_answers_a_declaring_spawn_with_the_daemons_task(
    tmp_path: Path,
) -> None:
    project, home = make_project(tmp_path / "p"), tmp_path / "home"
    write_script(project / "child.json", [{"text": "done on the daemon", "delay_s": 0.3}])
    with running_daemon(home, tmp_path):
        command, *args = loom_command()
        params = StdioServerParameters(
            command=command, args=[*args, "server", "subagents"], cwd=str(project), env=clean_env(home)
        )
        async with Client(params, extensions=[TaskResults()]) as client:
            created = await client.session.call_tool(
                "spawn", {"goal": "go", "model": "scripted:child.json"}, allow_claimed=True
            )
            assert isinstance(created, FaceTask), created
            with anyio.fail_after(30):
                while True:
                    task = await client.session.send_request(
                        _Get(method="tasks/get", params=_TaskId(taskId=created.task_id)), _Any
                    )
                    if task.model_extra and task.model_extra.get("status") in FINISHED:
                        break
                    await anyio.sleep(0.1)
        async with open_client(home, require_daemon=True) as loom:
            run = await loom.get_run(created.task_id.rpartition(".")[0])
    done = task.model_extra or {}
    assert done["status"] == "completed"
    assert done["result"]["structuredContent"]["final_text"] == "done on the daemon" == run.final_text
