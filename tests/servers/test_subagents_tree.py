"""Children of a real parent session, through the real face: failures stay where they happen.

The subagents server is the parent's (``session_id`` = the parent), as ``loom server subagents --parent P`` runs
it; the children are scripted: one succeeds, one's model fails, one hangs past its timeout.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.types import CallToolResult

from clients.loom import LoomClient, open_client
from orchestrator.events import ChildFinished, ChildStarted, ToolCallFinished, ToolCallStarted
from servers.subagents import build_server
from tests.clients.cli_support import make_project, write_script

pytestmark = pytest.mark.anyio

OK_ANSWER = "The README says: tools for widgets.\n\nOpen questions:\n- are the blue widgets still supported\n"
CHILDREN: dict[str, list[dict[str, Any]]] = {
    "ok.json": [
        {"text": "Reading.", "tool_calls": [{"name": "fs__read", "arguments": {"path": "README.md"}}]},
        {"text": OK_ANSWER},
    ],
    "fail.json": [{"error": "permanent:the provider refused the request"}],
    "hang.json": [{"text": "thinking for a long time", "delay_s": 60}],
}


def data(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    found: dict[str, Any] = result.structured_content
    return found


@contextlib.asynccontextmanager
async def parent_server(tmp_path: Path) -> AsyncIterator[tuple[Client, LoomClient, str]]:
    """The subagents server of a parent session on an in-process face, the face's client, and the parent's id."""
    project, home = make_project(tmp_path / "p"), tmp_path / "home"
    for name, turns in CHILDREN.items():
        write_script(project / name, turns)
    write_script(project / "parent.json", [{"text": "parent"}])
    async with open_client(home, cwd=project) as loom:
        parent = await loom.create_session(str(project), model="scripted:parent.json", mode="ask")

        @contextlib.asynccontextmanager
        async def connect() -> AsyncIterator[LoomClient]:
            yield loom

        server = build_server(connect, session_id=parent.session_id, cwd=project, home=home, project=project)
        async with Client(server) as client:
            yield client, loom, parent.session_id


async def test_one_fails_one_times_out_one_succeeds_and_each_outcome_comes_back(tmp_path: Path) -> None:
    async with parent_server(tmp_path) as (client, loom, parent):
        many = data(
            await client.call_tool(
                "spawn_many",
                {
                    "children": [
                        {"goal": "summarise the README", "model": "scripted:ok.json"},
                        {"goal": "this one fails", "model": "scripted:fail.json"},
                        {"goal": "this one hangs", "model": "scripted:hang.json", "timeout_s": 1.5},
                    ]
                },
            )
        )
        started = time.monotonic()
        waited = data(await client.call_tool("wait", {"mode": "all", "timeout_s": 30}))
        took = time.monotonic() - started
        sessions = {s.session_id: s for s in await loom.list_sessions()}

    ids = [c["child_id"] for c in many["children"]]
    assert many["started"] == 3 and len(set(ids)) == 3
    assert not waited["timed_out"] and waited["running"] == [] and took < 20
    by_id = {c["child_id"]: c for c in waited["finished"]}
    ok, failed, hung = (by_id[i] for i in ids)

    assert ok["status"] == "completed" and ok["final_text"] == OK_ANSWER  # undisturbed by its siblings
    assert ok["summary"]["open_questions"] == ["are the blue widgets still supported"]
    assert failed["status"] == "failed" and "the provider refused the request" in failed["reason"]
    assert hung["status"] == "timed_out" and hung["reason"].startswith("timed out")
    assert 1.0 <= hung["elapsed_s"] < 15

    # Each child is a session of its own, linked to its parent; the parent itself was not touched.
    assert all(sessions[i].parent_session_id == parent for i in ids)
    assert sessions[parent].status == "idle"


async def test_children_of_another_parent_are_not_this_ones(tmp_path: Path) -> None:
    async with parent_server(tmp_path) as (client, loom, parent):
        project = Path((await loom.get_session(parent)).cwd)
        other = await loom.create_session(str(project), model="scripted:parent.json", mode="ask")
        stranger = await loom.create_session("", parent_session_id=other.session_id, model="scripted:ok.json")
        refused = await client.call_tool("result", {"child_id": stranger.session_id})
        mine = data(await client.call_tool("spawn", {"goal": "summarise", "model": "scripted:ok.json"}))
        found = data(await client.call_tool("result", {"child_id": mine["child_id"]}))

    assert refused.is_error and "is not one of your children" in str(refused.content)
    assert found["child_id"] == mine["child_id"]


async def test_a_new_server_for_the_same_parent_finds_its_children(tmp_path: Path) -> None:
    # After a restart the server's memory is empty: the face still knows whose children they are.
    async with parent_server(tmp_path) as (client, loom, parent):
        spawned = data(await client.call_tool("spawn", {"goal": "summarise", "model": "scripted:ok.json"}))
        project = Path((await loom.get_session(parent)).cwd)

        @contextlib.asynccontextmanager
        async def connect() -> AsyncIterator[LoomClient]:
            yield loom

        again = build_server(connect, session_id=parent, cwd=project, home=tmp_path / "home", project=project)
        async with Client(again) as fresh:
            waited = data(await fresh.call_tool("wait", {"child_ids": [spawned["child_id"]], "timeout_s": 30}))

    (result,) = waited["finished"]
    assert result["run_id"] == spawned["run_id"] and result["status"] == "completed"
    assert result["final_text"] == OK_ANSWER


async def test_a_child_wider_than_its_parent_is_refused_with_the_faces_reason(tmp_path: Path) -> None:
    async with parent_server(tmp_path) as (client, loom, parent):
        unknown = await client.call_tool("spawn", {"goal": "x", "agent": "no-such-agent"})
        elsewhere = await client.call_tool("spawn", {"goal": "x", "allow": ["github__*"]})
        many = data(
            await client.call_tool(
                "spawn_many",
                {"children": [{"goal": "x", "agent": "no-such-agent"}, {"goal": "y", "model": "scripted:ok.json"}]},
            )
        )
        children = [s for s in await loom.list_sessions() if s.parent_session_id == parent]

    assert unknown.is_error and "no-such-agent" in str(unknown.content)
    assert elsewhere.is_error and "github" in str(elsewhere.content)
    assert [e["started"] for e in many["children"]] == [False, True]
    assert "no-such-agent" in many["children"][0]["error"]
    assert len(children) == 1  # nothing was started as something else


async def test_a_parents_model_spawns_three_children_and_is_told_all_three_outcomes(tmp_path: Path) -> None:
    # The demonstration, end to end: the parent's own (scripted) model calls subagents__spawn_many and
    # subagents__wait through its hub; the tools reach the face in-process; the children run as sessions.
    project, home = make_project(tmp_path / "p"), tmp_path / "home"
    for name, turns in CHILDREN.items():
        write_script(project / name, turns)
    children = [
        {"goal": "summarise the README", "model": "scripted:ok.json"},
        {"goal": "this one fails", "model": "scripted:fail.json"},
        {"goal": "this one hangs", "model": "scripted:hang.json", "timeout_s": 1.5},
    ]
    parent_turns: list[dict[str, Any]] = [
        {
            "text": "Fanning out.",
            "tool_calls": [{"name": "subagents__spawn_many", "arguments": {"children": children}}],
        },
        {
            "text": "Waiting.",
            "tool_calls": [{"id": "w", "name": "subagents__wait", "arguments": {"mode": "all", "timeout_s": 60}}],
        },
        {"text": "All three reported."},
    ]
    write_script(project / "parent.json", parent_turns)
    async with open_client(home, cwd=project) as loom:
        parent = await loom.create_session(str(project), model="scripted:parent.json", mode="ask")
        run = await loom.send_message(parent.session_id, "split the work", wait_s=30)
        for _ in range(3):
            if run.status not in ("queued", "running"):
                break
            run = await loom.get_run(run.run_id, wait_s=30)
        events = (await loom.read_events(parent.session_id, limit=1000)).events
        sessions = await loom.list_sessions()

    assert run.status == "completed", run
    waited = next(e for e in events if isinstance(e, ToolCallFinished) and e.tool == "subagents__wait")
    assert not waited.is_error and waited.structured is not None
    outcomes = sorted(c["status"] for c in waited.structured["finished"])
    assert outcomes == ["completed", "failed", "timed_out"]  # what the parent's model was told
    ok = next(c for c in waited.structured["finished"] if c["status"] == "completed")
    assert ok["final_text"] == OK_ANSWER
    # The text the model read: every outcome, a line each, and the answer.
    assert "3 finished, 0 still going" in waited.content
    assert all(f": {status}," in waited.content for status in ("completed", "failed", "timed_out"))
    assert "open questions: are the blue widgets still supported" in waited.content
    # Visible on the parent's stream while it ran, each child a session linked to the parent and its run.
    started = [e for e in events if isinstance(e, ChildStarted)]
    ended = sorted(e.status for e in events if isinstance(e, ChildFinished))
    assert len(started) == 3 and ended == ["completed", "failed", "failed"]  # a timed-out run ends failed
    kids = [s for s in sessions if s.parent_session_id == parent.session_id]
    assert len(kids) == 3 and {s.parent_run_id for s in kids} == {run.run_id}


async def test_cancelling_the_parent_mid_wait_leaves_its_subagents_tools_working(tmp_path: Path) -> None:
    # The wait is cut off in the middle of its calls on the server's shared connection; the next run's calls
    # must still get answers, and the child must have ended with its parent's run.
    project, home = make_project(tmp_path / "p"), tmp_path / "home"
    write_script(project / "hang.json", [{"text": "thinking", "delay_s": 60}])
    parent_turns: list[dict[str, Any]] = [
        {
            "text": "Starting one.",
            "tool_calls": [{"name": "subagents__spawn", "arguments": {"goal": "hang", "model": "scripted:hang.json"}}],
        },
        {"text": "Waiting.", "tool_calls": [{"name": "subagents__wait", "arguments": {"timeout_s": 60}}]},
        {"text": "Checking.", "tool_calls": [{"name": "subagents__wait", "arguments": {"timeout_s": 5}}]},
        {"text": "Checked."},
    ]
    write_script(project / "parent.json", parent_turns)
    async with open_client(home, cwd=project) as loom:
        parent = await loom.create_session(str(project), model="scripted:parent.json", mode="ask")
        first = await loom.send_message(parent.session_id, "start one")
        for _ in range(100):  # until the wait is under way
            events = (await loom.read_events(parent.session_id, limit=1000)).events
            if any(isinstance(e, ToolCallStarted) and e.tool == "subagents__wait" for e in events):
                break
            await anyio.sleep(0.05)
        await loom.cancel_run(first.run_id)
        cancelled = await loom.get_run(first.run_id, wait_s=10)
        (child,) = [s for s in await loom.list_sessions() if s.parent_session_id == parent.session_id]
        second = await loom.send_message(parent.session_id, "how is it", wait_s=30)
        events = (await loom.read_events(parent.session_id, limit=1000)).events

    assert cancelled.status == "cancelled" and second.status == "completed", second
    checks = [e for e in events if isinstance(e, ToolCallFinished) and e.run_id == second.run_id]
    (check,) = checks
    assert not check.is_error, check.content
    assert check.structured is not None
    # The child ended with its parent's run; the next wait tells the model so, and nothing is left going.
    (told,) = check.structured["finished"]
    assert (told["child_id"], told["status"]) == (child.session_id, "cancelled")
    assert told["reason"] == "its parent's run ended" and check.structured["running"] == []
    assert child.parent_run_id == first.run_id
