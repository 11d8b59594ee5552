"""A child session's server asks a question: it shows on its ancestors' streams, tagged with the child, and an
answer given there by its id reaches the child's server.

The server is a real stdio subprocess (tests/orchestrator/hub/asking_test_server.py), the models scripted, the
sessions driven through the face as a client drives them.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from orchestrator.config import ServerConfig
from orchestrator.face.server import build_face
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.host import SessionHost
from tests.mcp_calls import call

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(90)]

SERVER = Path(__file__).resolve().parents[1] / "hub" / "asking_test_server.py"
ASK: list[dict[str, Any]] = [
    {"text": "asking", "tool_calls": [{"id": "a", "name": "asking__ask", "arguments": {"topic": "pears"}}]},
    {"text": "got: {{result:a}}"},
]


def scripted(tmp_path: Path, turns: Sequence[Mapping[str, Any]], name: str = "child") -> str:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"turns": turns}))
    return f"scripted:{path}"


async def question_on(client: Client, session_id: str, kind: str = "question_asked") -> dict[str, Any]:
    """The first ``kind`` event on the session's own stream (bounded wait)."""
    with anyio.fail_after(30):
        while True:
            page = await call(client, "read_events", session_id=session_id, limit=1000)
            found = [e for e in page["events"] if e["type"] == kind]
            if found:
                return dict(found[0])
            await anyio.sleep(0.05)


async def finished(client: Client, run_id: str) -> dict[str, Any]:
    with anyio.fail_after(30):
        while True:
            run = await call(client, "get_run", run_id=run_id, wait_s=5)
            if run["status"] not in ("running", "queued", "awaiting_approval"):
                return dict(run)


async def test_a_childs_question_is_on_its_parents_stream_and_answered_from_there(tmp_path: Path) -> None:
    (tmp_path / "w").mkdir()
    asking = ServerConfig(name="asking", transport="stdio", command=sys.executable, args=(str(SERVER),))
    async with (
        embedded_runtime(tmp_path / "home", [asking]) as runtime,
        SessionHost(runtime) as host,
        Client(build_face(host)) as client,
    ):
        top = await call(client, "create_session", cwd=str(tmp_path / "w"), model="scripted:demo", mode="bypass")
        lineage = [top["session_id"]]
        child = await call(
            client, "create_session", cwd="", parent_session_id=lineage[-1], model=scripted(tmp_path, ASK)
        )
        cid = child["session_id"]
        run = await call(client, "send_message", session_id=cid, text="order")
        own = await question_on(client, cid)
        shown = [await question_on(client, sid) for sid in lineage]
        listed = (await call(client, "list_questions", session_id=top["session_id"]))["questions"]
        answered = await call(
            client, "answer_question", question_id=shown[0]["question_id"], action="accept",
            content={"name": "Kim", "count": 2}, answered_by="parent-watcher",
        )  # fmt: skip
        ended = await finished(client, run["run_id"])
        told = [await question_on(client, sid, "question_answered") for sid in lineage]
    assert own["child_session_id"] == "" and own["server"] == "asking" and "pears" in own["message"]
    for copy in shown:  # the parent sees the same question, tagged with the child that asked
        assert (copy["question_id"], copy["child_session_id"]) == (own["question_id"], cid)
        assert set(copy["requested_schema"]["properties"]) == {"name", "count"}
    assert [(q["question_id"], q["child_session_id"]) for q in listed] == [(own["question_id"], cid)]
    assert answered["action"] == "accept"
    assert ended["final_text"] == "got: accepted: 2 pears for Kim"  # the child's server got the parent's answer
    for said in told:
        assert (said["child_session_id"], said["answered_by"], said["action"]) == (cid, "parent-watcher", "accept")


async def test_a_childs_question_declined_on_the_parent_is_declined_for_the_childs_server(tmp_path: Path) -> None:
    (tmp_path / "w").mkdir()
    asking = ServerConfig(name="asking", transport="stdio", command=sys.executable, args=(str(SERVER),))
    async with (
        embedded_runtime(tmp_path / "home", [asking]) as runtime,
        SessionHost(runtime) as host,
        Client(build_face(host)) as client,
    ):
        top = await call(client, "create_session", cwd=str(tmp_path / "w"), model="scripted:demo", mode="bypass")
        child = await call(
            client, "create_session", cwd="", parent_session_id=top["session_id"], model=scripted(tmp_path, ASK)
        )
        run = await call(client, "send_message", session_id=child["session_id"], text="order")
        shown = await question_on(client, top["session_id"])
        await call(client, "answer_question", question_id=shown["question_id"], action="decline")
        ended = await finished(client, run["run_id"])
        left = (await call(client, "list_questions", session_id=top["session_id"]))["questions"]
    assert ended["final_text"] == "got: not answered: decline" and left == []


def ask_about(topic: str) -> list[dict[str, Any]]:
    return [
        {"text": "asking", "tool_calls": [{"id": "a", "name": "asking__ask", "arguments": {"topic": topic}}]},
        {"text": "got: {{result:a}}"},
    ]


async def asked_by(client: Client, session_id: str, child: str) -> dict[str, Any]:
    """The question on ``session_id``'s stream that ``child`` asked ("": its own), bounded."""
    with anyio.fail_after(30):
        while True:
            page = await call(client, "read_events", session_id=session_id, limit=1000)
            found = [e for e in page["events"] if e["type"] == "question_asked" and e["child_session_id"] == child]
            if found:
                return dict(found[0])
            await anyio.sleep(0.05)


async def test_a_grandchilds_question_reaches_the_top_through_its_running_parent(tmp_path: Path) -> None:
    """The middle session is running (itself waiting on a question) while its child asks: the top sees both."""
    (tmp_path / "w").mkdir()
    asking = ServerConfig(name="asking", transport="stdio", command=sys.executable, args=(str(SERVER),))
    async with (
        embedded_runtime(tmp_path / "home", [asking]) as runtime,
        SessionHost(runtime) as host,
        Client(build_face(host)) as client,
    ):
        top = (await call(client, "create_session", cwd=str(tmp_path / "w"), model="scripted:demo", mode="bypass"))[
            "session_id"
        ]
        middle = (
            await call(
                client,
                "create_session",
                cwd="",
                parent_session_id=top,
                model=scripted(tmp_path, ask_about("plums"), "middle"),
            )  # fmt: skip
        )["session_id"]
        middle_run = await call(client, "send_message", session_id=middle, text="order")
        await asked_by(client, middle, "")
        grandchild = (
            await call(
                client,
                "create_session",
                cwd="",
                parent_session_id=middle,
                model=scripted(tmp_path, ask_about("figs"), "grandchild"),
            )  # fmt: skip
        )["session_id"]
        run = await call(client, "send_message", session_id=grandchild, text="order")
        on_top = await asked_by(client, top, grandchild)
        on_middle = await asked_by(client, middle, grandchild)
        await call(client, "answer_question", question_id=on_top["question_id"], action="accept",
                   content={"name": "Lu", "count": 5})  # fmt: skip
        ended = await finished(client, run["run_id"])
        middles = await asked_by(client, top, middle)
        await call(client, "answer_question", question_id=middles["question_id"], action="decline")
        middle_ended = await finished(client, middle_run["run_id"])
    assert "figs" in on_top["message"] and on_top["question_id"] == on_middle["question_id"]
    assert ended["final_text"] == "got: accepted: 5 figs for Lu"
    assert "plums" in middles["message"] and middle_ended["final_text"] == "got: not answered: decline"
