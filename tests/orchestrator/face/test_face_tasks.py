"""Runs as MCP tasks (SEP-2663), driven with raw 2026-07-28 JSON-RPC over the daemon's real HTTP.

The face is served by the daemon's app under real uvicorn (tests/orchestrator/daemon/served_app.py), and one
test goes through a real ``loom serve`` subprocess. Sessions run scripted models.
"""

from __future__ import annotations

import contextlib
import json
import stat
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from orchestrator.face.server import build_face
from orchestrator.face.tasks import IDENTIFIER, KEY_FILE
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.host import SessionHost
from tests.orchestrator.daemon.daemon_process import http, running_daemon
from tests.orchestrator.daemon.served_app import served

pytestmark = pytest.mark.anyio

TOKEN = "tasks-test-token"
WITH_TASKS: dict[str, Any] = {"extensions": {IDENTIFIER: {}}}


@dataclass
class Raw:
    """A raw JSON-RPC client of the face at 2026-07-28; ``caps`` is what each request declares."""

    client: httpx2.AsyncClient
    url: str
    caps: dict[str, Any]
    name: str = "raw-driver"
    _ids: int = 0

    async def rpc(self, method: str, params: Mapping[str, Any], *, caps: dict[str, Any] | None = None) -> Any:
        """The JSON-RPC response object (``result`` or ``error``)."""
        self._ids += 1
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": self.caps if caps is None else caps,
            "io.modelcontextprotocol/clientInfo": {"name": self.name, "version": "1"},
        }
        named = params.get("name") if method == "tools/call" else params.get("taskId")
        headers = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-method": method,
            "mcp-protocol-version": "2026-07-28",
            **({"mcp-name": str(named)} if named is not None else {}),
        }
        body = {"jsonrpc": "2.0", "id": self._ids, "method": method, "params": {**params, "_meta": meta}}
        response = await self.client.post(self.url, content=json.dumps(body), headers=headers)
        answer = response.json()
        # A modern-era JSON-RPC error travels with an HTTP error status (-32602 as 400); a result with 200.
        assert response.status_code == (200 if "result" in answer else 400), response.text
        return answer

    async def result(self, method: str, params: Mapping[str, Any], **kwargs: Any) -> dict[str, Any]:
        answer = await self.rpc(method, params, **kwargs)
        assert "result" in answer, answer
        return dict(answer["result"])

    async def tool(self, name: str, caps: dict[str, Any] | None = None, **arguments: Any) -> dict[str, Any]:
        return await self.result("tools/call", {"name": name, "arguments": arguments}, caps=caps)

    async def plain(self, name: str, **arguments: Any) -> dict[str, Any]:
        """A tool's structured result, asked without the extension."""
        result = await self.tool(name, caps={}, **arguments)
        assert not result.get("isError"), result
        return dict(result["structuredContent"])

    async def poll(self, task_id: str, until: Sequence[str]) -> dict[str, Any]:
        with anyio.fail_after(30):
            while True:
                task = await self.result("tasks/get", {"taskId": task_id})
                if task["status"] in until:
                    return task
                await anyio.sleep(0.05)


@contextlib.asynccontextmanager
async def face_over_http(tmp_path: Path, resolver: Any = None) -> AsyncIterator[Raw]:
    async with embedded_runtime(tmp_path / "home") as runtime, SessionHost(runtime, resolver) as host:
        async with served(build_face(host), TOKEN) as origin, http(TOKEN) as client:
            yield Raw(client, f"{origin}/mcp", WITH_TASKS)


def script(tmp_path: Path, turns: Sequence[Mapping[str, Any]]) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"turns": turns}))
    return f"scripted:{path}"


async def new_session(raw: Raw, tmp_path: Path, turns: Sequence[Mapping[str, Any]], mode: str = "bypass") -> str:
    session = await raw.plain("create_session", cwd=str(tmp_path), model=script(tmp_path, turns), mode=mode)
    return str(session["session_id"])


async def test_a_message_answered_with_a_task_is_polled_to_its_result(tmp_path: Path) -> None:
    async with face_over_http(tmp_path) as raw:
        discovered = await raw.result("server/discover", {})
        session_id = await new_session(raw, tmp_path, [{"text": "the answer", "delay_s": 0.3}])
        created = await raw.tool("send_message", session_id=session_id, text="question", wait_s=30)
        done = await raw.poll(created["taskId"], ["completed", "failed", "cancelled"])
        run = await raw.plain("get_run", run_id=done["result"]["structuredContent"]["run_id"])
    assert IDENTIFIER in discovered["capabilities"]["extensions"]
    # Answered at once (wait_s is the handle-based tools' business), with the task's seed state only.
    assert created["resultType"] == "task" and created["status"] == "working"
    assert {"result", "inputRequests", "error"}.isdisjoint(created)
    assert created["pollIntervalMs"] > 0 and created["ttlMs"] is None
    assert created["createdAt"].endswith("Z") and created["lastUpdatedAt"] >= created["createdAt"]
    assert len(created["taskId"]) > 40  # the run id plus a 192-bit MAC: not the run id, not guessable from it
    assert done["resultType"] == "complete" and done["status"] == "completed"
    assert done["result"]["structuredContent"] == run  # what the handle-based get_run says of the same run
    assert run["status"] == "completed" and run["final_text"] == "the answer"
    assert json.loads(done["result"]["content"][0]["text"]) == run
    assert stat.S_IMODE((tmp_path / "home" / KEY_FILE).stat().st_mode) == 0o600


async def test_a_run_that_fails_is_a_completed_task_whose_result_says_failed(tmp_path: Path) -> None:
    async with face_over_http(tmp_path) as raw:
        session_id = await new_session(raw, tmp_path, [{"text": "too late", "delay_s": 60}])
        created = await raw.tool("send_message", session_id=session_id, text="hurry", timeout_s=0.5)
        done = await raw.poll(created["taskId"], ["completed", "failed", "cancelled"])
    # "failed" is the spec's for JSON-RPC errors; a run that failed is a tool result, as get_run gives it.
    assert done["status"] == "completed" and "error" not in done
    info = done["result"]["structuredContent"]
    assert info["status"] == "failed" and "timed out" in info["reason"]


async def test_a_task_cancelled_mid_run_cancels_the_run(tmp_path: Path) -> None:
    async with face_over_http(tmp_path) as raw:
        session_id = await new_session(raw, tmp_path, [{"text": "never said", "delay_s": 60}])
        created = await raw.tool("send_message", session_id=session_id, text="take your time")
        working = await raw.result("tasks/get", {"taskId": created["taskId"]})
        with anyio.fail_after(15):
            ack = await raw.result("tasks/cancel", {"taskId": created["taskId"]})
        cancelled = await raw.poll(created["taskId"], ["completed", "failed", "cancelled"])
        runs = await raw.plain("list_sessions")
        page = await raw.plain("read_events", session_id=session_id)
    assert working["status"] == "working"
    assert ack == {"resultType": "complete", "_meta": ack["_meta"]}  # an empty acknowledgement
    assert cancelled["status"] == "cancelled" and "result" not in cancelled
    assert runs["sessions"][0]["status"] != "running"
    finished = [e for e in page["events"] if e["type"] == "run_finished"]
    assert [e["status"] for e in finished] == ["cancelled"]


WRITE_THEN_DONE: list[dict[str, Any]] = [
    {"text": "writing", "tool_calls": [{"name": "fs__write", "arguments": {"path": "a.txt", "content": "A"}}]},
    {"text": "written"},
]


async def test_an_approval_is_input_required_and_answered_through_tasks_update(tmp_path: Path) -> None:
    async with face_over_http(tmp_path) as raw:
        session_id = await new_session(raw, tmp_path, WRITE_THEN_DONE, mode="ask")
        created = await raw.tool("send_message", session_id=session_id, text="write it")
        asking = await raw.poll(created["taskId"], ["input_required", "completed", "failed", "cancelled"])
        assert asking["status"] == "input_required", asking
        ((key, request),) = asking["inputRequests"].items()
        assert not (tmp_path / "a.txt").exists()  # nothing ran while it waits
        # An answer to a key this task never asked for is ignored; a malformed answer is a clear error.
        ignored = await raw.result(
            "tasks/update",
            {"taskId": created["taskId"], "inputResponses": {"a_other": {"action": "accept", "content": {}}}},
        )
        still = await raw.result("tasks/get", {"taskId": created["taskId"]})
        bad = await raw.rpc(
            "tasks/update",
            {"taskId": created["taskId"], "inputResponses": {key: {"action": "accept", "content": {"decision": "y"}}}},
        )
        ack = await raw.result(
            "tasks/update",
            {
                "taskId": created["taskId"],
                "inputResponses": {key: {"action": "accept", "content": {"decision": "approve_once"}}},
            },
        )
        done = await raw.poll(created["taskId"], ["completed", "failed", "cancelled"])
        page = await raw.plain("read_events", session_id=session_id)
    assert request["method"] == "elicitation/create"
    assert request["params"]["mode"] == "form" and "fs__write" in request["params"]["message"]
    assert request["params"]["requestedSchema"]["properties"]["decision"]["enum"] == [
        "approve_once",
        "approve_session",
        "deny",
    ]
    assert ignored["resultType"] == "complete" and still["status"] == "input_required"
    assert bad["error"]["code"] == -32602 and "decision must be approve_once" in bad["error"]["message"]
    assert ack["resultType"] == "complete"
    assert done["status"] == "completed" and done["result"]["structuredContent"]["final_text"] == "written"
    assert (tmp_path / "a.txt").read_text() == "A"
    decided = [e for e in page["events"] if e["type"] == "approval_decided"]
    assert [(e["approval_id"], e["decision"], e["decided_by"]) for e in decided] == [
        (key, "approve_once", "mcp:raw-driver")
    ]


async def test_declining_the_approval_denies_the_call(tmp_path: Path) -> None:
    async with face_over_http(tmp_path) as raw:
        session_id = await new_session(raw, tmp_path, WRITE_THEN_DONE, mode="ask")
        created = await raw.tool("send_message", session_id=session_id, text="write it")
        asking = await raw.poll(created["taskId"], ["input_required"])
        (key,) = asking["inputRequests"]
        await raw.result("tasks/update", {"taskId": created["taskId"], "inputResponses": {key: {"action": "decline"}}})
        done = await raw.poll(created["taskId"], ["completed", "failed", "cancelled"])
        page = await raw.plain("read_events", session_id=session_id)
    assert done["status"] == "completed"
    assert not (tmp_path / "a.txt").exists()
    decided = [e for e in page["events"] if e["type"] == "approval_decided"]
    assert [e["decision"] for e in decided] == ["deny"] and "declined" in decided[0]["reason"]


async def test_a_client_without_the_extension_gets_the_handle_based_result(tmp_path: Path) -> None:
    async with face_over_http(tmp_path) as raw:
        session_id = await new_session(raw, tmp_path, [{"text": "plain"}])
        result = await raw.tool("send_message", caps={}, session_id=session_id, text="hi", wait_s=10)
        other_extension = await raw.tool(
            "send_message", caps={"extensions": {"com.example/other": {}}}, session_id=session_id, text="again"
        )
    assert result["resultType"] == "complete" and "taskId" not in result
    assert result["structuredContent"]["status"] == "completed" and result["structuredContent"]["final_text"] == "plain"
    assert other_extension["resultType"] == "complete" and "run_id" in other_extension["structuredContent"]


async def test_a_handshake_era_client_gets_the_handle_based_tools_and_no_tasks_methods(tmp_path: Path) -> None:
    from mcp import Client, MCPError
    from mcp.client.streamable_http import streamable_http_client
    from mcp_types import Request, Result

    async with embedded_runtime(tmp_path / "home") as runtime, SessionHost(runtime) as host:
        async with served(build_face(host), TOKEN) as origin, http(TOKEN) as client:
            async with Client(streamable_http_client(f"{origin}/mcp", http_client=client), mode="legacy") as legacy:
                model = script(tmp_path, [{"text": "legacy"}])
                made = await legacy.call_tool(
                    "create_session", {"cwd": str(tmp_path), "model": model, "mode": "bypass"}
                )
                assert made.structured_content is not None
                session_id = made.structured_content["session_id"]
                run = await legacy.call_tool("send_message", {"session_id": session_id, "text": "hi", "wait_s": 10})
                get = Request[dict[str, Any], str](method="tasks/get", params={"taskId": "x.y"})
                with pytest.raises(MCPError) as refused:
                    await legacy.session.send_request(get, result_type=Result)
    assert run.structured_content is not None and run.structured_content["final_text"] == "legacy"
    assert refused.value.error.code == -32601


async def test_a_guessed_or_unknown_task_id_is_a_clear_error(tmp_path: Path) -> None:
    async with face_over_http(tmp_path) as raw:
        session_id = await new_session(raw, tmp_path, [{"text": "ok"}])
        created = await raw.tool("send_message", session_id=session_id, text="hi")
        run_id = created["taskId"].rpartition(".")[0]
        forged = f"{run_id}.{'A' * 32}"
        answers = {
            "run id": await raw.rpc("tasks/get", {"taskId": run_id}),
            "forged": await raw.rpc("tasks/get", {"taskId": forged}),
            "unknown": await raw.rpc("tasks/get", {"taskId": "t_nothing"}),
            "update": await raw.rpc("tasks/update", {"taskId": forged, "inputResponses": {}}),
            "cancel": await raw.rpc("tasks/cancel", {"taskId": forged}),
        }
        refused = await raw.tool("send_message", session_id="s_nope", text="hi")
        real = await raw.poll(created["taskId"], ["completed"])
    for what, answer in answers.items():
        assert answer["error"]["code"] == -32602, (what, answer)
        assert "Failed to retrieve task" in answer["error"]["message"], (what, answer)
    assert real["result"]["structuredContent"]["final_text"] == "ok"  # the forgery did not touch the real task
    # A call refused before any run began answers with its error, not with a task.
    assert refused["isError"] and "taskId" not in refused


async def test_an_interrupted_run_stays_working_and_resume_run_answers_with_the_same_task(tmp_path: Path) -> None:
    async with face_over_http(tmp_path) as raw:
        session_id = await new_session(raw, tmp_path, [{"text": "thinking", "delay_s": 60}])
        created = await raw.tool("send_message", session_id=session_id, text="one")
    # The host closed with the run in progress: it is interrupted, which Loom can continue, so not terminal.

    def resolver(spec: str, cwd: Path) -> Any:
        from orchestrator.models.scripted import FunctionModel

        return FunctionModel(lambda request: {"text": "after restart"})

    async with face_over_http(tmp_path, resolver) as raw:
        interrupted = await raw.result("tasks/get", {"taskId": created["taskId"]})
        run_id = created["taskId"].rpartition(".")[0]
        resumed = await raw.tool("resume_run", run_id=run_id)
        done = await raw.poll(resumed["taskId"], ["completed", "failed", "cancelled"])
    assert interrupted["status"] == "working" and "resume_run" in interrupted["statusMessage"]
    assert resumed["resultType"] == "task" and resumed["taskId"] == created["taskId"]
    assert done["result"]["structuredContent"]["final_text"] == "after restart"


async def test_a_task_survives_a_restart_of_the_face(tmp_path: Path) -> None:
    async with face_over_http(tmp_path) as raw:
        session_id = await new_session(raw, tmp_path, [{"text": "before the restart"}])
        created = await raw.tool("send_message", session_id=session_id, text="hi")
        first = await raw.poll(created["taskId"], ["completed"])
    async with face_over_http(tmp_path) as raw:  # a new runtime and host on the same home: nothing in memory
        again = await raw.result("tasks/get", {"taskId": created["taskId"]})
    assert first["result"]["structuredContent"]["final_text"] == "before the restart"
    assert again["status"] == "completed" and again["result"] == first["result"]
    assert again["createdAt"] == first["createdAt"]


async def test_loom_serve_answers_a_declaring_client_with_a_task(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    with running_daemon(home, work) as daemon:
        async with http(daemon.token) as client:
            raw = Raw(client, daemon.url, WITH_TASKS)
            session_id = await new_session(raw, work, [{"text": "from the daemon"}])
            created = await raw.tool("send_message", session_id=session_id, text="hi")
            done = await raw.poll(created["taskId"], ["completed"])
            plain = await raw.tool("send_message", caps={}, session_id=session_id, text="again")
    assert created["resultType"] == "task"
    assert done["result"]["structuredContent"]["final_text"] == "from the daemon"
    assert plain["resultType"] == "complete" and "run_id" in plain["structuredContent"]


async def test_a_model_cannot_read_the_key_task_ids_are_derived_with(tmp_path: Path) -> None:
    read_key: list[dict[str, Any]] = [
        {"text": "peek", "tool_calls": [{"id": "k", "name": "fs__read", "arguments": {"path": f"home/{KEY_FILE}"}}]},
        {"text": "saw: {{result:k}}"},
    ]
    async with face_over_http(tmp_path) as raw:  # the workspace, tmp_path, holds Loom's home
        session_id = await new_session(raw, tmp_path, read_key)
        created = await raw.tool("send_message", session_id=session_id, text="read it")
        done = await raw.poll(created["taskId"], ["completed", "failed", "cancelled"])
    key = (tmp_path / "home" / KEY_FILE).read_bytes()
    said = done["result"]["structuredContent"]["final_text"]
    assert len(key) == 32 and said.startswith("saw: ") and "inside Loom's own state" in said, said


async def test_an_orchestration_answered_with_a_task_is_polled_to_its_report(tmp_path: Path) -> None:
    from tests.orchestrator.face.orchestration_support import install_roles

    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    install_roles(home, tmp_path)
    async with face_over_http(tmp_path) as raw:
        made = await raw.plain("create_session", cwd=str(work), model="scripted:demo", mode="bypass", headless=True)
        created = await raw.tool("orchestrate", session_id=made["session_id"], goal="ship it", task_timeout_s=30)
        done = await raw.poll(created["taskId"], ["completed", "failed", "cancelled"])
        plain = await raw.plain("get_orchestration", session_id=made["session_id"])
    assert created["resultType"] == "task" and created["status"] == "working"
    assert done["status"] == "completed" and done["result"]["structuredContent"] == plain
    assert plain["status"] == "passed" and {t["state"] for t in plain["tasks"]} == {"passed"}
