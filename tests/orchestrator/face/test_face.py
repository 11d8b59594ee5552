"""The MCP face driven by the real MCP client, in-process, in both protocol eras."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from orchestrator.face.server import build_face
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.host import SessionHost
from orchestrator.trust import read_project, trust
from tests.mcp_calls import call

pytestmark = pytest.mark.anyio

MODES = ["auto", "legacy"]


@contextlib.asynccontextmanager
async def face_client(tmp_path: Path, mode: str) -> AsyncIterator[Client]:
    async with embedded_runtime(tmp_path / "home") as runtime, SessionHost(runtime) as host:
        async with Client(build_face(host), mode=mode) as client:
            yield client


def script(tmp_path: Path, turns: Sequence[Mapping[str, Any]]) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"turns": turns}))
    return f"scripted:{path}"


@pytest.mark.parametrize("mode", MODES)
async def test_a_driver_runs_a_session_and_follows_its_events(tmp_path: Path, mode: str) -> None:
    (tmp_path / "work").mkdir()
    model = script(
        tmp_path,
        [
            {"text": "writing", "tool_calls": [{"name": "fs__write", "arguments": {"path": "a.txt", "content": "A"}}]},
            {"text": "wrote a.txt"},
        ],
    )
    async with face_client(tmp_path, mode) as client:
        session = await call(client, "create_session", cwd=str(tmp_path / "work"), model=model, mode="bypass")
        run = await call(client, "send_message", session_id=session["session_id"], text="go", wait_s=10)
        page = await call(client, "read_events", session_id=session["session_id"])
        more = await call(client, "read_events", session_id=session["session_id"], after_seq=page["next_after_seq"])
    assert (run["status"], run["final_text"]) == ("completed", "wrote a.txt")
    assert (tmp_path / "work" / "a.txt").read_text() == "A"
    seqs = [e["seq"] for e in page["events"]]
    assert seqs == list(range(1, len(seqs) + 1)) and page["events"][-1]["type"] == "run_finished"
    assert more["events"] == [] and more["next_after_seq"] == page["next_after_seq"]


async def test_create_session_answers_what_get_session_then_says(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    model = script(tmp_path, [{"text": "hi"}])
    async with face_client(tmp_path, "auto") as client:
        for notice in ("scripted:demo", model):  # the demo's session starts with a notice; the other with none
            created = await call(client, "create_session", cwd=str(tmp_path / "work"), model=notice, headless=True)
            assert created == await call(client, "get_session", session_id=created["session_id"])


@pytest.mark.parametrize("mode", MODES)
async def test_send_returns_at_once_and_a_run_can_be_cancelled(tmp_path: Path, mode: str) -> None:
    model = script(tmp_path, [{"text": "slow", "delay_s": 30}])
    async with face_client(tmp_path, mode) as client:
        session = await call(client, "create_session", cwd=str(tmp_path), model=model)
        run = await call(client, "send_message", session_id=session["session_id"], text="go")
        assert run["status"] == "running"
        cancelled = await call(client, "cancel_run", run_id=run["run_id"])
        page = await call(client, "read_events", session_id=session["session_id"], wait_s=1)
    assert cancelled["status"] == "cancelled"
    assert page["events"][-1]["type"] == "run_finished" and page["events"][-1]["status"] == "cancelled"


async def test_unknown_ids_and_bad_directories_are_clear_errors(tmp_path: Path) -> None:
    async with face_client(tmp_path, "auto") as client:
        bad_run = await client.call_tool("get_run", {"run_id": "r_nope"})
        bad_session = await client.call_tool("send_message", {"session_id": "s_nope", "text": "hi"})
        bad_cwd = await client.call_tool("create_session", {"cwd": str(tmp_path / "missing"), "model": "scripted:demo"})
    assert bad_run.is_error and "no run 'r_nope'" in bad_run.content[0].text  # type: ignore[union-attr]
    assert bad_session.is_error and "list_sessions" in bad_session.content[0].text  # type: ignore[union-attr]
    assert bad_cwd.is_error and "not a directory" in bad_cwd.content[0].text  # type: ignore[union-attr]


WRITE_THEN_DONE: list[dict[str, Any]] = [
    {"text": "writing", "tool_calls": [{"name": "fs__write", "arguments": {"path": "a.txt", "content": "A"}}]},
    {"text": "finished"},
]


@pytest.mark.parametrize("mode", MODES)
async def test_an_approval_waits_and_a_second_client_answers_it(tmp_path: Path, mode: str) -> None:
    model = script(tmp_path, WRITE_THEN_DONE)
    async with embedded_runtime(tmp_path / "home") as runtime, SessionHost(runtime) as host:
        face = build_face(host)
        async with Client(face, mode=mode) as driver, Client(face, mode=mode) as reviewer:
            session = await call(driver, "create_session", cwd=str(tmp_path), model=model)  # mode 'ask'
            run = await call(driver, "send_message", session_id=session["session_id"], text="go", wait_s=5)
            assert run["status"] == "awaiting_approval" and len(run["pending_approvals"]) == 1
            assert not (tmp_path / "a.txt").exists()  # nothing ran while waiting
            pending = await call(reviewer, "list_approvals")
            (approval,) = pending["approvals"]
            assert approval["tool"] == "fs__write" and approval["arguments"]["path"] == "a.txt"
            decided = await call(
                reviewer,
                "decide_approval",
                approval_id=approval["approval_id"],
                decision="approve_once",
                decided_by="reviewer-test",
            )
            again = await reviewer.call_tool(
                "decide_approval", {"approval_id": approval["approval_id"], "decision": "deny"}
            )
            done = await call(driver, "get_run", run_id=run["run_id"], wait_s=10)
            page = await call(driver, "read_events", session_id=session["session_id"])
    assert decided["decision"] == "approve_once" and decided["decided_by"] == "reviewer-test"
    assert again.is_error  # the first answer won
    assert done["status"] == "completed" and (tmp_path / "a.txt").read_text() == "A"
    decisions = [e for e in page["events"] if e["type"] == "approval_decided"]
    assert [(d["decision"], d["decided_by"]) for d in decisions] == [("approve_once", "reviewer-test")]


async def test_a_denial_reaches_the_model_with_its_reason(tmp_path: Path) -> None:
    model = script(tmp_path, WRITE_THEN_DONE)
    async with face_client(tmp_path, "auto") as client:
        session = await call(client, "create_session", cwd=str(tmp_path), model=model)
        run = await call(client, "send_message", session_id=session["session_id"], text="go", wait_s=5)
        (approval_id,) = run["pending_approvals"]
        await call(client, "decide_approval", approval_id=approval_id, decision="deny", reason="not today")
        done = await call(client, "get_run", run_id=run["run_id"], wait_s=10)
        page = await call(client, "read_events", session_id=session["session_id"])
    finished = [e for e in page["events"] if e["type"] == "tool_call_finished"]
    assert done["status"] == "completed" and not (tmp_path / "a.txt").exists()
    assert finished[0]["failure"] == "denied" and "not today" in finished[0]["content"]


async def test_plan_mode_refuses_changes_without_asking(tmp_path: Path) -> None:
    model = script(tmp_path, WRITE_THEN_DONE)
    async with face_client(tmp_path, "auto") as client:
        session = await call(client, "create_session", cwd=str(tmp_path), model=model, mode="plan")
        done = await call(client, "send_message", session_id=session["session_id"], text="go", wait_s=10)
        page = await call(client, "read_events", session_id=session["session_id"])
    assert done["status"] == "completed" and not (tmp_path / "a.txt").exists()
    assert not any(e["type"] == "approval_requested" for e in page["events"])
    assert any(e["type"] == "tool_call_finished" and e["failure"] == "denied" for e in page["events"])


async def test_sessions_and_runs_survive_a_restart_and_interrupted_runs_say_so(tmp_path: Path) -> None:
    slow = script(tmp_path, [{"text": "first answer"}, {"text": "thinking", "delay_s": 30}])
    home = tmp_path / "home"
    async with face_client(tmp_path, "auto") as client:
        session = await call(client, "create_session", cwd=str(tmp_path), model=slow, mode="bypass")
        sid = session["session_id"]
        first = await call(client, "send_message", session_id=sid, text="one", wait_s=10)
        second = await call(client, "send_message", session_id=sid, text="two")  # still running at shutdown
    seen: list[int] = []

    def resolver(spec: str, cwd: Path) -> Any:
        from orchestrator.models.scripted import FunctionModel

        def answer(request: Any) -> dict[str, Any]:
            seen.append(len(request.messages))
            return {"text": "after restart"}

        return FunctionModel(answer)

    async with embedded_runtime(home) as runtime, SessionHost(runtime, resolver) as host:
        async with Client(build_face(host)) as client:
            old_first = await call(client, "get_run", run_id=first["run_id"])
            old_second = await call(client, "get_run", run_id=second["run_id"])
            listed = await call(client, "list_sessions")
            third = await call(client, "send_message", session_id=sid, text="three", wait_s=10)
            archived = await call(client, "archive_session", session_id=sid)
            after = await call(client, "list_sessions")
    assert (old_first["status"], old_first["final_text"]) == ("completed", "first answer")
    assert old_second["status"] == "interrupted"
    assert [s["session_id"] for s in listed["sessions"]] == [sid]
    assert third["status"] == "completed" and third["final_text"] == "after restart"
    assert seen == [4]  # one, first answer, two (interrupted, no answer), three: the history was rebuilt
    assert archived["archived"] and after["sessions"] == []


@pytest.mark.parametrize("mode", MODES)
async def test_a_client_with_elicitation_is_asked_and_its_answer_applied(tmp_path: Path, mode: str) -> None:
    from mcp import types as mt
    from mcp.client.context import ClientRequestContext

    asked: list[str] = []

    async def on_elicit(
        context: ClientRequestContext, params: mt.ElicitRequestParams
    ) -> mt.ElicitResult | mt.ErrorData:
        asked.append(params.message)
        return mt.ElicitResult(action="accept", content={"decision": "deny", "reason": "the user said no"})

    model = script(tmp_path, WRITE_THEN_DONE)
    async with embedded_runtime(tmp_path / "home") as runtime, SessionHost(runtime) as host:
        async with Client(build_face(host), mode=mode, elicitation_callback=on_elicit) as client:
            session = await call(client, "create_session", cwd=str(tmp_path), model=model)
            run = await call(client, "send_message", session_id=session["session_id"], text="go", wait_s=5)
            (approval_id,) = run["pending_approvals"]
            reviewed = await call(client, "review_approval", approval_id=approval_id)
            done = await call(client, "get_run", run_id=run["run_id"], wait_s=10)
    assert len(asked) == 1 and "fs__write" in asked[0] and "a.txt" in asked[0]
    assert reviewed["decision"] == "deny"
    assert done["status"] == "completed" and not (tmp_path / "a.txt").exists()


@pytest.mark.parametrize("mode", MODES)
async def test_a_waiting_call_reports_progress_as_events_arrive(tmp_path: Path, mode: str) -> None:
    model = script(
        tmp_path,
        [
            {"text": "listing", "tool_calls": [{"name": "fs__list", "arguments": {}}], "delay_s": 0.2},
            {"text": "done", "delay_s": 0.2},
        ],
    )
    messages: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")

    async with face_client(tmp_path, mode) as client:
        session = await call(client, "create_session", cwd=str(tmp_path), model=model)
        started = await call(client, "send_message", session_id=session["session_id"], text="go")
        result = await client.call_tool(
            "get_run", {"run_id": started["run_id"], "wait_s": 10}, progress_callback=on_progress
        )
    assert result.structured_content is not None and result.structured_content["status"] == "completed"
    assert "tool_call_finished fs__list" in messages and messages[-1] == "run_finished"


POLICY = """
[[rules]]
action = "deny"
tool = "fs__write"
path = "secrets/**"

[[rules]]
action = "allow"
tool = "fs__write"
path = "notes/**"
"""


async def test_project_rules_decide_before_the_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOOM_HOME", str(tmp_path / "home"))
    (tmp_path / ".loom").mkdir()
    (tmp_path / ".loom" / "policy.toml").write_text(POLICY)
    trust(tmp_path / "home", tmp_path, read_project(tmp_path).digest)  # its allow rule applies once trusted
    (tmp_path / "secrets").mkdir()
    (tmp_path / "notes").mkdir()
    model = script(
        tmp_path,
        [
            {
                "tool_calls": [
                    {"name": "fs__write", "arguments": {"path": "secrets/k.txt", "content": "k"}},
                    {"name": "fs__write", "arguments": {"path": "notes/n.txt", "content": "n"}},
                ]
            },
            {"text": "done"},
        ],
    )
    async with face_client(tmp_path, "auto") as client:
        # bypass: the deny rule still wins; ask: the allow rule lets the notes write through without asking
        for mode in ("bypass", "ask"):
            session = await call(client, "create_session", cwd=str(tmp_path), model=model, mode=mode)
            run = await call(client, "send_message", session_id=session["session_id"], text="go", wait_s=10)
            assert run["status"] == "completed", run
            page = await call(client, "read_events", session_id=session["session_id"])
            denied = [e for e in page["events"] if e["type"] == "tool_call_finished" and e["failure"] == "denied"]
            assert len(denied) == 1 and not any(e["type"] == "approval_requested" for e in page["events"])
            assert "secrets" in denied[0]["content"] or "deny" in denied[0]["content"].lower()
    assert not (tmp_path / "secrets" / "k.txt").exists() and (tmp_path / "notes" / "n.txt").read_text() == "n"


async def test_a_bad_policy_file_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOOM_HOME", str(tmp_path / "home"))
    (tmp_path / ".loom").mkdir()
    (tmp_path / ".loom" / "policy.toml").write_text('[[rules]]\naction = "maybe"\ntool = "x"\n')
    async with face_client(tmp_path, "auto") as client:
        result = await client.call_tool("create_session", {"cwd": str(tmp_path), "model": "scripted:demo"})
        listed = await call(client, "list_sessions")
    assert result.is_error and "policy.toml" in result.content[0].text  # type: ignore[union-attr]
    assert listed["sessions"] == []  # nothing was recorded
