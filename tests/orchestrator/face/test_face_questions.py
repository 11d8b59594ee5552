"""A server's questions (elicitation) and sampling requests, answered through the face by a second client.

The server is a real stdio subprocess (tests/orchestrator/hub/asking_test_server.py); the session's model is
scripted. Each flow runs against a server of the 2026-07-28 era and one of the handshake era.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from orchestrator.config import ServerConfig
from orchestrator.events import QuestionAnswered, QuestionAsked, ToolCallFinished
from orchestrator.face.server import build_face
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.host import SessionHost
from tests.mcp_calls import call, error_of

pytestmark = pytest.mark.anyio

SERVER = Path(__file__).resolve().parents[1] / "hub" / "asking_test_server.py"
ERAS = ["modern", "legacy"]


def asking(era: str) -> ServerConfig:
    env = {"ASKING_LEGACY_ONLY": "1"} if era == "legacy" else {}
    return ServerConfig(name="asking", transport="stdio", command=sys.executable, args=(str(SERVER),), env=env)


def script(tmp_path: Path, turns: Sequence[Mapping[str, Any]]) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"turns": turns}))
    return f"scripted:{path}"


@contextlib.asynccontextmanager
async def two_clients(tmp_path: Path, era: str) -> AsyncIterator[tuple[SessionHost, Client, Client]]:
    async with embedded_runtime(tmp_path / "home", [asking(era)]) as runtime, SessionHost(runtime) as host:
        face = build_face(host)
        async with Client(face) as driver, Client(face) as answerer:
            yield host, driver, answerer


async def open_question(client: Client, session_id: str) -> dict[str, Any]:
    with anyio.fail_after(20):
        while True:
            listed = await call(client, "list_questions", session_id=session_id)
            if listed["questions"]:
                return dict(listed["questions"][0])
            await anyio.sleep(0.05)


async def finished(client: Client, run_id: str) -> dict[str, Any]:
    with anyio.fail_after(30):
        while True:
            run = await call(client, "get_run", run_id=run_id, wait_s=5)
            if run["status"] not in ("running", "queued", "awaiting_approval"):
                return run


ASK: list[dict[str, Any]] = [
    {"text": "asking", "tool_calls": [{"id": "a", "name": "asking__ask", "arguments": {"topic": "apples"}}]},
    {"text": "got: {{result:a}}"},
]


@pytest.mark.parametrize("era", ERAS)
async def test_a_question_is_answered_from_a_second_client_and_reaches_the_server(tmp_path: Path, era: str) -> None:
    async with two_clients(tmp_path, era) as (host, driver, answerer):
        session = await call(driver, "create_session", cwd=str(tmp_path), model=script(tmp_path, ASK), mode="bypass")
        run = await call(driver, "send_message", session_id=session["session_id"], text="order")
        question = await open_question(answerer, session["session_id"])
        assert question["server"] == "asking" and "apples" in question["message"]
        assert question["run_id"] == run["run_id"] and set(question["requested_schema"]["properties"]) == {
            "name",
            "count",
        }
        wrong = await error_of(
            answerer, "answer_question", question_id=question["question_id"], action="accept",
            content={"name": "Ann", "count": "three"},
        )  # fmt: skip
        assert "count" in wrong and "stays open" in wrong
        assert (await open_question(answerer, session["session_id"]))["question_id"] == question["question_id"]
        answered = await call(
            answerer, "answer_question", question_id=question["question_id"], action="accept",
            content={"name": "Ann", "count": 3}, answered_by="tester",
        )  # fmt: skip
        again = await error_of(answerer, "answer_question", question_id=question["question_id"], action="decline")
        ended = await finished(driver, run["run_id"])
        events = await host.runtime.log.store.read_events(session["session_id"])
    assert answered["action"] == "accept" and "not open" in again
    assert ended["final_text"] == "got: accepted: 3 apples for Ann"
    (said,) = [e for e in events if isinstance(e, QuestionAnswered)]
    assert (said.action, said.content, said.answered_by) == ("accept", {"name": "Ann", "count": 3}, "tester")
    assert [e.question_id for e in events if isinstance(e, QuestionAsked)] == [question["question_id"]]


async def test_a_headless_session_declines_a_question_at_once_saying_why(tmp_path: Path) -> None:
    async with two_clients(tmp_path, "modern") as (host, driver, _):
        session = await call(driver, "create_session", cwd=str(tmp_path), model=script(tmp_path, ASK), headless=True,
                             mode="bypass")  # fmt: skip
        run = await call(driver, "send_message", session_id=session["session_id"], text="order", wait_s=20)
        events = await host.runtime.log.store.read_events(session["session_id"])
    assert run["final_text"] == "got: not answered: decline"
    (said,) = [e for e in events if isinstance(e, QuestionAnswered)]
    assert said.action == "decline" and "headless" in said.reason and said.answered_by == "loom"


async def test_a_question_nobody_answers_is_cancelled_saying_so(tmp_path: Path) -> None:
    async with two_clients(tmp_path, "modern") as (host, driver, answerer):
        host.runtime.questions.timeout_s = 0.5
        session = await call(driver, "create_session", cwd=str(tmp_path), model=script(tmp_path, ASK), mode="bypass")
        run = await call(driver, "send_message", session_id=session["session_id"], text="order", wait_s=20)
        left = await call(answerer, "list_questions")
        events = await host.runtime.log.store.read_events(session["session_id"])
    assert run["final_text"] == "got: not answered: cancel" and left["questions"] == []
    (said,) = [e for e in events if isinstance(e, QuestionAnswered)]
    assert said.action == "cancel" and "nobody answered within 0.5 s" in said.reason


SUMMARIZE: list[dict[str, Any]] = [
    {"text": "summing", "tool_calls": [{"id": "s", "name": "asking__summarize", "arguments": {"text": "a long text"}}]},
    {"text": "it is short"},  # the session's model answers the server's sampling request
    {"text": "server said: {{result:s}}"},
]
ALLOW_SUMMARIZE = '[[rules]]\naction = "allow"\ntool = "asking__summarize"\n'


@pytest.mark.parametrize("era", ERAS)
async def test_sampling_is_served_by_the_sessions_model_once_approved(tmp_path: Path, era: str) -> None:
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "policy.toml").write_text(ALLOW_SUMMARIZE)
    model = script(tmp_path, SUMMARIZE)
    async with two_clients(tmp_path, era) as (host, driver, answerer):
        session = await call(driver, "create_session", cwd=str(tmp_path), model=model, mode="ask")
        run = await call(driver, "send_message", session_id=session["session_id"], text="go", wait_s=20)
        assert run["status"] == "awaiting_approval"
        (approval,) = (await call(answerer, "list_approvals", session_id=session["session_id"]))["approvals"]
        assert (
            approval["tool"] == "asking__sampling"
            and approval["arguments"]["messages"][0]["text"] == "Summarize: a long text"
        )
        await call(answerer, "decide_approval", approval_id=approval["approval_id"], decision="approve_once")
        ended = await finished(driver, run["run_id"])
    assert ended["final_text"] == f"server said: summary by {model}: it is short"


async def test_a_headless_run_denies_sampling_saying_why(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "policy.toml").write_text(ALLOW_SUMMARIZE)
    async with two_clients(tmp_path, "modern") as (host, driver, _):
        session = await call(driver, "create_session", cwd=str(tmp_path), model=script(tmp_path, SUMMARIZE),
                             mode="ask", headless=True)  # fmt: skip
        run = await call(driver, "send_message", session_id=session["session_id"], text="go", wait_s=20)
        events = await host.runtime.log.store.read_events(session["session_id"])
    (result,) = [e for e in events if isinstance(e, ToolCallFinished)]
    assert result.is_error and "sampling" in result.content and "headless" in result.content
    assert run["status"] == "completed"  # the model's next turn went on without it: no turn was spent sampling


SLOW: list[dict[str, Any]] = [
    {"text": "working", "tool_calls": [{"id": "w", "name": "asking__slow", "arguments": {"steps": 12}}]},
    {"text": "done: {{result:w}}"},
]


@pytest.mark.parametrize("era", ERAS)
async def test_a_follower_on_the_face_sees_a_tool_calls_progress_live(tmp_path: Path, era: str) -> None:
    async with two_clients(tmp_path, era) as (_, driver, follower):
        session = await call(driver, "create_session", cwd=str(tmp_path), model=script(tmp_path, SLOW), mode="bypass")
        run = await call(driver, "send_message", session_id=session["session_id"], text="go")
        seen: list[dict[str, Any]] = []
        after, ended = 0, False
        with anyio.fail_after(30):
            while not ended:
                page = await call(follower, "read_events", session_id=session["session_id"], after_seq=after, wait_s=2)
                after = page["next_after_seq"]
                seen.extend(p for p in page["progress"] if p not in seen)
                ended = any(e["type"] == "run_finished" for e in page["events"])
        last = await call(follower, "read_events", session_id=session["session_id"], after_seq=after)
    assert len(seen) >= 2 and all(p["run_id"] == run["run_id"] and p["tool"] == "asking__slow" for p in seen)
    assert [p["progress"] for p in seen] == sorted(p["progress"] for p in seen) and seen[0]["total"] == 12
    assert "of 12" in seen[-1]["message"] and last["progress"] == []  # none is left once the call is over
