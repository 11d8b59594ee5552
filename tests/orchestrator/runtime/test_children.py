"""Child sessions through the face: in the tree, never freer than their parent, visible on the parent's stream."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from orchestrator.config import load_config
from orchestrator.face.server import build_face
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.host import SessionHost
from tests.mcp_calls import call, error_of
from tests.orchestrator.face.test_face import face_client

pytestmark = pytest.mark.anyio

WRITE = {"name": "fs__write", "arguments": {"path": "a.txt", "content": "A"}}


def scripted(tmp_path: Path, name: str, turns: Sequence[Mapping[str, Any]]) -> str:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"turns": turns}))
    return f"scripted:{path}"


def agent(home: Path, name: str, front: str, body: str = "You review things.") -> None:
    (home / "agents").mkdir(parents=True, exist_ok=True)
    (home / "agents" / f"{name}.md").write_text(f"---\nname: {name}\ndescription: {name} agent\n{front}---\n{body}\n")


async def events_of(client: Client, sid: str) -> list[dict[str, Any]]:
    return list((await call(client, "read_events", session_id=sid, limit=1000))["events"])


async def until(client: Client, sid: str, kind: str, count: int = 1) -> list[dict[str, Any]]:
    with anyio.fail_after(15):
        while True:
            found = [e for e in await events_of(client, sid) if e["type"] == kind]
            if len(found) >= count:
                return found
            await anyio.sleep(0.05)


async def test_a_child_is_listed_under_its_parent_works_in_its_directory_and_inherits_its_mode(tmp_path: Path) -> None:
    (tmp_path / "w" / "sub").mkdir(parents=True)
    agent(tmp_path / "home", "reviewer", "tools: Read, Grep\n")
    async with face_client(tmp_path, "auto") as client:
        parent = await call(client, "create_session", cwd=str(tmp_path / "w"), model="scripted:demo", mode="plan")
        pid = parent["session_id"]
        child = await call(client, "create_session", cwd="", parent_session_id=pid, agent="reviewer")
        inner = await call(client, "create_session", cwd=str(tmp_path / "w" / "sub"), parent_session_id=pid)
        listed = {s["session_id"]: s for s in (await call(client, "list_sessions"))["sessions"]}
    assert (child["parent_session_id"], child["agent"], child["mode"]) == (pid, "reviewer", "plan")
    assert child["cwd"] == str((tmp_path / "w").resolve()) and child["model"] == "scripted:demo"
    assert inner["cwd"] == str((tmp_path / "w" / "sub").resolve())
    assert listed[child["session_id"]]["parent_session_id"] == pid and listed[pid]["parent_session_id"] == ""


@pytest.mark.parametrize(
    ("ask", "words"),
    [
        ({"mode": "bypass"}, ["freer", "'ask'"]),
        ({"allow": ["github__*"]}, ["github__*", "no tool"]),
        ({"allow": ["fs__nope"]}, ["fs__nope"]),
        ({"cwd": "/"}, ["outside"]),
        ({"agent": "free"}, ["bypass", "freer"]),
        ({"agent": "ghost"}, ["no agent definition named 'ghost'", "free"]),
        ({"mode": "yolo"}, ["unknown mode"]),
    ],
)
async def test_a_request_for_more_than_the_parent_has_is_refused_saying_what(
    tmp_path: Path, ask: dict[str, Any], words: list[str]
) -> None:
    (tmp_path / "w").mkdir()
    agent(tmp_path / "home", "free", "permissionMode: bypassPermissions\n")
    async with face_client(tmp_path, "auto") as client:
        pid = (await call(client, "create_session", cwd=str(tmp_path / "w"), model="scripted:demo", mode="ask"))[
            "session_id"
        ]
        message = await error_of(client, "create_session", **{"cwd": "", "parent_session_id": pid, **ask})
        listed = (await call(client, "list_sessions"))["sessions"]
    for word in words:
        assert word in message
    assert [s["session_id"] for s in listed] == [pid]  # nothing was started as something else


async def test_a_grandchild_cannot_get_back_a_tool_its_parent_was_not_allowed(tmp_path: Path) -> None:
    (tmp_path / "w").mkdir()
    async with face_client(tmp_path, "auto") as client:
        pid = (await call(client, "create_session", cwd=str(tmp_path / "w"), model="scripted:demo", mode="bypass"))[
            "session_id"
        ]
        child = await call(client, "create_session", cwd="", parent_session_id=pid, allow=["fs__read", "fs__list"])
        refused = await error_of(
            client, "create_session", cwd="", parent_session_id=child["session_id"], allow=["shell__run"]
        )
        unlisted = await error_of(client, "create_session", cwd="", agent="x")
    assert "shell__run" in refused and "no tool" in refused
    assert "parent_session_id" in unlisted


async def test_a_childs_calls_are_decided_by_its_parents_policy_too(tmp_path: Path) -> None:
    """A child allowed everything by its own level is still held by its parent's deny rule and plan mode."""
    work, home = tmp_path / "w", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    (home / "policy.toml").write_text('[[rules]]\naction = "deny"\ntool = "shell__run"\ncommand = "touch *"\n')
    touch = {"name": "shell__run", "arguments": {"command": "touch x.txt"}}
    child_model = scripted(tmp_path, "child", [{"tool_calls": [touch]}, {"tool_calls": [WRITE]}, {"text": "tried"}])
    async with face_client(tmp_path, "auto") as client:
        pid = (await call(client, "create_session", cwd=str(work), model="scripted:demo", mode="bypass"))["session_id"]
        cid = (await call(client, "create_session", cwd="", parent_session_id=pid, model=child_model))["session_id"]
        await call(client, "set_mode", session_id=pid, mode="plan")  # the parent is made stricter: so is the child
        run = await call(client, "send_message", session_id=cid, text="go", wait_s=20)
        events = await events_of(client, cid)
    assert run["status"] == "completed"
    results = [e for e in events if e["type"] == "tool_call_finished"]
    assert [r["failure"] for r in results] == ["denied", "denied"]
    assert "touch" in results[0]["content"] and "plan mode" in results[1]["content"]
    assert "never freer than its parent" in results[1]["content"]
    assert not (work / "x.txt").exists() and not (work / "a.txt").exists()


async def test_a_childs_approval_is_on_its_parents_stream_and_answered_there(tmp_path: Path) -> None:
    (tmp_path / "w").mkdir()
    child_model = scripted(tmp_path, "child", [{"tool_calls": [WRITE]}, {"text": "wrote it"}])
    async with face_client(tmp_path, "auto") as client:
        pid = (await call(client, "create_session", cwd=str(tmp_path / "w"), model="scripted:demo", mode="ask"))[
            "session_id"
        ]
        cid = (await call(client, "create_session", cwd="", parent_session_id=pid, model=child_model))["session_id"]
        run = await call(client, "send_message", session_id=cid, text="write a.txt")
        (asked,) = await until(client, pid, "approval_requested")
        (listed,) = (await call(client, "list_approvals", session_id=pid))["approvals"]
        await call(client, "decide_approval", approval_id=asked["approval_id"], decision="approve_once")
        done = await call(client, "get_run", run_id=run["run_id"], wait_s=20)
        await until(client, pid, "child_finished")
        parent_events = await events_of(client, pid)
    assert asked["child_session_id"] == cid and asked["tool"] == "fs__write"
    assert (listed["approval_id"], listed["child_session_id"], listed["session_id"]) == (asked["approval_id"], cid, pid)
    assert done["status"] == "completed" and (tmp_path / "w" / "a.txt").read_text() == "A"
    kinds = [e["type"] for e in parent_events]
    assert kinds.index("child_started") < kinds.index("approval_requested") < kinds.index("approval_decided")
    (decided,) = [e for e in parent_events if e["type"] == "approval_decided"]
    (activity,) = [e for e in parent_events if e["type"] == "child_activity"]
    (finished,) = [e for e in parent_events if e["type"] == "child_finished"]
    assert decided["child_session_id"] == cid and activity["tool"] == "fs__write"
    assert (finished["status"], finished["final_text"], finished["child_run_id"]) == (
        "completed",
        "wrote it",
        run["run_id"],
    )


async def test_a_headless_parents_child_is_denied_what_would_ask_and_told_why(tmp_path: Path) -> None:
    (tmp_path / "w").mkdir()
    child_model = scripted(tmp_path, "child", [{"tool_calls": [WRITE]}, {"text": "could not"}])
    async with face_client(tmp_path, "auto") as client:
        parent = await call(
            client, "create_session", cwd=str(tmp_path / "w"), model="scripted:demo", mode="ask", headless=True
        )
        cid = (await call(client, "create_session", cwd="", parent_session_id=parent["session_id"], model=child_model))[
            "session_id"
        ]
        run = await call(client, "send_message", session_id=cid, text="write", wait_s=20)
        events = await events_of(client, cid)
    assert run["status"] == "completed" and not (tmp_path / "w" / "a.txt").exists()
    (result,) = [e for e in events if e["type"] == "tool_call_finished"]
    assert result["failure"] == "denied" and "headless" in result["content"]
    assert not [e for e in events if e["type"] == "approval_requested"]  # never asked, never silently allowed


async def test_a_run_past_its_timeout_fails_saying_so(tmp_path: Path) -> None:
    (tmp_path / "w").mkdir()
    slow = scripted(tmp_path, "slow", [{"text": "thinking", "delay_s": 30}])
    async with face_client(tmp_path, "auto") as client:
        sid = (await call(client, "create_session", cwd=str(tmp_path / "w"), model=slow))["session_id"]
        run = await call(client, "send_message", session_id=sid, text="go", timeout_s=0.5, wait_s=20)
        stored = await call(client, "get_run", run_id=run["run_id"])
    assert run["status"] == stored["status"] == "failed"
    assert run["reason"].startswith("timed out after 0.5 s")


async def test_when_the_parents_run_ends_its_childs_run_is_cancelled(tmp_path: Path) -> None:
    (tmp_path / "w").mkdir()
    parent_model = scripted(tmp_path, "parent", [{"tool_calls": [WRITE]}, {"text": "stopped"}])
    slow = scripted(tmp_path, "slow", [{"text": "thinking", "delay_s": 30}])
    async with face_client(tmp_path, "auto") as client:
        pid = (await call(client, "create_session", cwd=str(tmp_path / "w"), model=parent_model, mode="ask"))[
            "session_id"
        ]
        parent_run = await call(client, "send_message", session_id=pid, text="go")
        await until(client, pid, "approval_requested")  # the parent's run is going
        child = await call(client, "create_session", cwd="", parent_session_id=pid, model=slow)
        child_run = await call(client, "send_message", session_id=child["session_id"], text="think")
        await until(client, pid, "child_started")
        await call(client, "cancel_run", run_id=parent_run["run_id"])
        ended = await call(client, "get_run", run_id=child_run["run_id"], wait_s=20)
        (finished,) = await until(client, pid, "child_finished")
    assert child["parent_run_id"] == parent_run["run_id"]
    assert (ended["status"], ended["reason"]) == ("cancelled", "its parent's run ended")
    assert finished["status"] == "cancelled"


async def test_a_reopened_child_is_bounded_as_it_was_and_cannot_be_made_freer(tmp_path: Path) -> None:
    (tmp_path / "w").mkdir()
    child_model = scripted(tmp_path, "child", [{"tool_calls": [WRITE]}, {"text": "tried"}])
    async with face_client(tmp_path, "auto") as client:
        pid = (await call(client, "create_session", cwd=str(tmp_path / "w"), model="scripted:demo", mode="bypass"))[
            "session_id"
        ]
        cid = (
            await call(client, "create_session", cwd="", parent_session_id=pid, model=child_model, allow=["fs__read"])
        )["session_id"]
    async with embedded_runtime(tmp_path / "home") as runtime, SessionHost(runtime) as host:
        async with Client(build_face(host)) as client:
            await call(client, "set_mode", session_id=pid, mode="ask")
            freer = await error_of(client, "set_mode", session_id=cid, mode="bypass")
            run = await call(client, "send_message", session_id=cid, text="write", wait_s=20)
            events = await events_of(client, cid)
    assert "freer" in freer or "never freer" in freer
    assert run["status"] == "completed" and not (tmp_path / "w" / "a.txt").exists()
    (result,) = [e for e in events if e["type"] == "tool_call_finished"]
    assert result["failure"] == "unknown_tool"  # not in its allow-list: not even offered to its model


async def test_a_sessions_own_subagents_tools_start_a_child_whose_approval_stops_the_parents_wait(
    tmp_path: Path,
) -> None:
    """Through the session's in-process subagents server: spawn, the child's approval, wait, the answer."""
    (tmp_path / "w").mkdir()
    child_model = scripted(tmp_path, "child", [{"tool_calls": [WRITE]}, {"text": "wrote a.txt"}])
    spawn = {"name": "subagents__spawn", "arguments": {"goal": "write a.txt", "model": child_model}}
    wait = {"id": "w", "name": "subagents__wait", "arguments": {"mode": "all", "timeout_s": 60}}
    parent_model = scripted(
        tmp_path, "parent", [{"tool_calls": [spawn]}, {"tool_calls": [wait]}, {"text": "{{result:w}}"}]
    )
    async with face_client(tmp_path, "auto") as client:
        pid = (await call(client, "create_session", cwd=str(tmp_path / "w"), model=parent_model, mode="ask"))[
            "session_id"
        ]
        run = await call(client, "send_message", session_id=pid, text="delegate", wait_s=30)
        (approval_id,) = run["pending_approvals"]
        await call(client, "decide_approval", approval_id=approval_id, decision="approve_once")
        done = await call(client, "get_run", run_id=run["run_id"], wait_s=30)
        (child,) = [s for s in (await call(client, "list_sessions"))["sessions"] if s["parent_session_id"]]
    assert run["status"] == "awaiting_approval"  # the child's approval is the parent's to answer
    assert done["status"] == "completed" and (tmp_path / "w" / "a.txt").read_text() == "A"
    assert "completed" in done["final_text"] and "files changed: a.txt" in done["final_text"]
    assert "wrote a.txt" in done["final_text"]
    assert (child["parent_session_id"], child["parent_run_id"]) == (pid, run["run_id"])


async def test_interrupted_runs_resume_parents_first(tmp_path: Path) -> None:
    (tmp_path / "w").mkdir()
    # One answer per run and no tool call: the demo script's denied command left each child's run waiting for
    # its parent's approval until the wait gave up (30 s a run), which is not what this test is about.
    model = scripted(tmp_path, "hi", [{"text": "done"}])
    async with embedded_runtime(tmp_path / "home") as runtime, SessionHost(runtime) as host:
        async with Client(build_face(host)) as client:
            top = await call(client, "create_session", cwd=str(tmp_path / "w"), model=model)
            child = await call(client, "create_session", cwd="", parent_session_id=top["session_id"], model=model)
            grandchild = await call(
                client, "create_session", cwd="", parent_session_id=child["session_id"], model=model
            )
        runs = {}
        for info in (grandchild, top, child):
            handle = await host.start_run(info["session_id"], "hi", 5)
            await host.wait(handle.run_id, 30)
            assert (await host.view(handle.run_id)).status == "completed"
            runs[info["session_id"]] = handle.run_id
        ordered = await host.parents_first(
            [runs[grandchild["session_id"]], runs[child["session_id"]], runs[top["session_id"]]]
        )
    assert ordered == [runs[top["session_id"]], runs[child["session_id"]], runs[grandchild["session_id"]]]


async def test_a_sessions_advisor_is_kept_when_it_is_reopened_and_its_child_runs_with_it(tmp_path: Path) -> None:
    """The advisor (a second model) rejects a write in a full-advisor session, its reopened self and its child."""
    (tmp_path / "w").mkdir()
    home = tmp_path / "home"
    home.mkdir()
    reject = {"text": '{"verdict": "reject", "reasons": ["no writes today"]}'}
    (home / "config.json").write_text(
        json.dumps({"advisor": {"mode": "off", "model": scripted(tmp_path, "adv", [reject] * 4)}})
    )
    model = scripted(tmp_path, "agent", [{"tool_calls": [WRITE]}, {"text": "ok"}] * 3)
    config = load_config(home, tmp_path / "w")
    async with (
        embedded_runtime(home, config=config) as runtime,
        SessionHost(runtime) as host,
        Client(build_face(host)) as client,
    ):
        bad = await error_of(client, "create_session", cwd=str(tmp_path / "w"), model=model, advisor="sometimes")
        sid = (
            await call(client, "create_session", cwd=str(tmp_path / "w"), model=model, mode="bypass", advisor="full")
        )["session_id"]
        cid = (await call(client, "create_session", cwd="", parent_session_id=sid, model=model))["session_id"]
        child_run = await call(client, "send_message", session_id=cid, text="write", wait_s=20)
        child_events = await events_of(client, cid)
    async with embedded_runtime(home, config=config) as runtime, SessionHost(runtime) as host:
        async with Client(build_face(host)) as client:
            run = await call(client, "send_message", session_id=sid, text="write", wait_s=20)
            events = await events_of(client, sid)
    assert "unknown advisor mode 'sometimes'" in bad
    for ran, seen in ((child_run, child_events), (run, events)):
        assert ran["status"] == "completed"
        (reviewed,) = [e for e in seen if e["type"] == "advisor_reviewed"]
        assert (reviewed["verdict"], reviewed["reasons"]) == ("reject", ["no writes today"])
    assert not (tmp_path / "w" / "a.txt").exists()


async def test_a_tree_of_sessions_may_have_only_so_many_children_running_at_once(tmp_path: Path) -> None:
    (tmp_path / "w").mkdir()
    slow = scripted(tmp_path, "slow", [{"text": "thinking", "delay_s": 30}])
    async with embedded_runtime(tmp_path / "home") as runtime, SessionHost(runtime) as host:
        host.max_tree_children = 2
        async with Client(build_face(host)) as client:
            top = (await call(client, "create_session", cwd=str(tmp_path / "w"), model="scripted:demo"))["session_id"]
            child = (await call(client, "create_session", cwd="", parent_session_id=top, model=slow))["session_id"]
            await call(client, "send_message", session_id=child, text="think")
            grandchild = (await call(client, "create_session", cwd="", parent_session_id=child, model=slow))[
                "session_id"
            ]
            await call(client, "send_message", session_id=grandchild, text="think")
            refused = await error_of(client, "create_session", cwd="", parent_session_id=grandchild)
            also = await error_of(client, "create_session", cwd="", parent_session_id=top)
    assert "2 child sessions running" in refused and "do the work here" in refused
    assert also == refused  # counted over the whole tree, at every depth


async def test_an_external_server_the_parent_was_not_given_stays_out_of_reach_of_its_children(tmp_path: Path) -> None:
    """A real stdio server: a child limited to fs tools never sees it, and its own child cannot ask for it back."""
    import sys

    from orchestrator.config import ServerConfig

    ext = ServerConfig(
        name="ext",
        transport="stdio",
        command=sys.executable,
        args=(str(Path(__file__).parents[1] / "stdio_test_server.py"),),
    )
    (tmp_path / "w").mkdir()
    echo = {"name": "ext__echo", "arguments": {"text": "hi"}}
    child_model = scripted(tmp_path, "child", [{"tool_calls": [echo]}, {"text": "tried"}])
    async with embedded_runtime(tmp_path / "home", [ext]) as runtime, SessionHost(runtime) as host:
        async with Client(build_face(host)) as client:
            top = (await call(client, "create_session", cwd=str(tmp_path / "w"), model="scripted:demo", mode="bypass"))[
                "session_id"
            ]
            allowed = await call(client, "create_session", cwd="", parent_session_id=top, allow=["ext__*"])
            cid = (
                await call(client, "create_session", cwd="", parent_session_id=top, model=child_model, allow=["fs__*"])
            )["session_id"]
            refused = await error_of(client, "create_session", cwd="", parent_session_id=cid, allow=["ext__echo"])
            run = await call(client, "send_message", session_id=cid, text="echo", wait_s=20)
            events = await events_of(client, cid)
    assert allowed["parent_session_id"] == top  # the top-level session has it, so a child may ask for it
    assert "ext__echo" in refused and "no tool" in refused
    assert run["status"] == "completed"
    (result,) = [e for e in events if e["type"] == "tool_call_finished"]
    assert result["failure"] == "unknown_tool" and "ext__echo" in result["content"]
