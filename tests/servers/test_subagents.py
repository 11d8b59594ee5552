"""The subagents server over a real in-process face: spawn returns at once, waits are bounded, ids are checked.

These run the server standalone-style (no parent session: its children are top-level sessions in a directory);
the parent-and-child behaviour is in ``test_subagents_tree.py``.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.types import CallToolResult

from clients.loom import LoomClient, open_client
from servers.subagents import build_server
from tests.clients.cli_support import make_project, write_script

pytestmark = pytest.mark.anyio

ANSWER = "Read it: widgets.\n\nOpen questions:\n- which widgets are blue\n"
READS: list[dict[str, Any]] = [
    {"text": "Reading.", "tool_calls": [{"name": "fs__read", "arguments": {"path": "README.md"}}]},
    {"text": ANSWER},
]


@contextlib.asynccontextmanager
async def subagents(tmp_path: Path, turns: list[dict[str, Any]]) -> AsyncIterator[tuple[Client, LoomClient, Path]]:
    """The subagents server's MCP client, the face's client, and the project (its scripted model: ``s.json``)."""
    project, home = make_project(tmp_path / "p"), tmp_path / "home"
    write_script(project / "s.json", turns)
    async with open_client(home, cwd=project) as loom:

        @contextlib.asynccontextmanager
        async def connect() -> AsyncIterator[LoomClient]:
            yield loom

        server = build_server(connect, session_id=None, cwd=project, home=home, project=project)
        async with Client(server) as client:
            yield client, loom, project


def data(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    found: dict[str, Any] = result.structured_content
    return found


def error(result: CallToolResult) -> str:
    assert result.is_error, result.structured_content
    return " ".join(getattr(b, "text", "") for b in result.content)


async def test_spawn_returns_at_once_and_wait_brings_the_answer_and_its_summary(tmp_path: Path) -> None:
    slow = [{**READS[0], "delay_s": 1.0}, READS[1]]
    async with subagents(tmp_path, slow) as (client, loom, _project):
        started = time.monotonic()
        spawned = data(await client.call_tool("spawn", {"goal": "read the README", "model": "scripted:s.json"}))
        assert time.monotonic() - started < 0.9  # the child's first model call alone takes 1 s
        assert spawned["status"] in ("queued", "running")
        waited = data(await client.call_tool("wait", {"timeout_s": 30}))
        child = await loom.get_session(spawned["child_id"])

    assert not waited["timed_out"] and waited["running"] == []
    (result,) = waited["finished"]
    assert result["child_id"] == spawned["child_id"] and result["status"] == "completed"
    assert result["final_text"] == ANSWER and result["steps"] == 2
    assert result["summary"]["open_questions"] == ["which widgets are blue"]
    assert child.cwd.endswith("/p")  # a session of its own in the store


async def test_a_wait_is_bounded_and_reports_progress_of_a_child_still_going(tmp_path: Path) -> None:
    slow = [{**READS[0], "delay_s": 20.0}, READS[1]]
    async with subagents(tmp_path, slow) as (client, _loom, _project):
        spawned = data(await client.call_tool("spawn", {"goal": "read slowly", "model": "scripted:s.json"}))
        started = time.monotonic()
        waited = data(await client.call_tool("wait", {"timeout_s": 0.5}))
        took = time.monotonic() - started
        progress = data(await client.call_tool("result", {"child_id": spawned["child_id"]}))
        cancelled = data(await client.call_tool("cancel", {"child_id": spawned["child_id"]}))

    assert took < 5 and waited["timed_out"] and waited["finished"] == []
    (going,) = waited["running"]
    assert going["status"] == "running" and not going["finished"] and going["elapsed_s"] > 0
    assert progress["status"] == "running" and progress["summary"] is None
    assert cancelled["status"] == "cancelled" and cancelled["finished"]


async def test_wait_any_returns_when_the_first_child_ends(tmp_path: Path) -> None:
    async with subagents(tmp_path, READS) as (client, loom, project):
        write_script(project / "slow.json", [{"text": "later", "delay_s": 20.0}])
        fast = data(await client.call_tool("spawn", {"goal": "quick", "model": "scripted:s.json"}))
        slow = data(await client.call_tool("spawn", {"goal": "slow", "model": "scripted:slow.json"}))
        started = time.monotonic()
        waited = data(
            await client.call_tool("wait", {"child_ids": [fast["child_id"], slow["child_id"]], "mode": "any"})
        )
        took = time.monotonic() - started
        await loom.cancel_run(slow["run_id"])

    assert took < 10 and not waited["timed_out"]
    assert [c["child_id"] for c in waited["finished"]] == [fast["child_id"]]
    assert [c["child_id"] for c in waited["running"]] == [slow["child_id"]]


async def test_a_session_that_is_not_its_child_cannot_be_read_steered_or_cancelled(tmp_path: Path) -> None:
    # The class of attack: a model passes some other session's id (the user's own session, a sibling's).
    async with subagents(tmp_path, [{"text": "mine", "delay_s": 20.0}]) as (client, loom, project):
        other = await loom.create_session(str(project), model="scripted:s.json", mode="plan")
        run = await loom.send_message(other.session_id, "the user's own work")
        refusals = [
            error(await client.call_tool("result", {"child_id": other.session_id})),
            error(await client.call_tool("send", {"child_id": other.session_id, "message": "rm -rf"})),
            error(await client.call_tool("cancel", {"child_id": other.session_id})),
            error(await client.call_tool("wait", {"child_ids": [other.session_id], "timeout_s": 1})),
        ]
        still = await loom.get_run(run.run_id)
        await loom.cancel_run(run.run_id)

    assert all("is not one of your children" in r for r in refusals), refusals
    assert still.status == "running"  # untouched


async def test_bad_arguments_are_refused_in_the_models_terms(tmp_path: Path) -> None:
    async with subagents(tmp_path, READS) as (client, loom, _project):
        bad = [
            await client.call_tool("spawn", {"goal": ""}),
            await client.call_tool("spawn", {"goal": "x", "max_steps": 0}),
            await client.call_tool("spawn", {"goal": "x", "timeout_s": 10**9}),
            await client.call_tool("spawn_many", {"children": []}),
            await client.call_tool("wait", {"timeout_s": 3600}),
            await client.call_tool("wait", {"mode": "some"}),
        ]
        sessions = await loom.list_sessions()

    assert all(r.is_error for r in bad)
    assert sessions == []  # nothing was started by a refused call


async def test_a_refused_child_in_spawn_many_does_not_stop_the_others(tmp_path: Path) -> None:
    async with subagents(tmp_path, READS) as (client, _loom, _project):
        many = data(
            await client.call_tool(
                "spawn_many",
                {
                    "children": [
                        {"goal": "one", "model": "scripted:s.json"},
                        {"goal": "two", "model": "nosuchprovider:x"},
                        {"goal": "three", "model": "scripted:s.json"},
                    ]
                },
            )
        )
        waited = data(await client.call_tool("wait", {"mode": "all", "timeout_s": 30}))

    assert [e["started"] for e in many["children"]] == [True, False, True]
    assert (many["started"], many["refused"]) == (2, 1)
    assert "nosuchprovider" in many["children"][1]["error"]
    assert sorted(c["status"] for c in waited["finished"]) == ["completed", "completed"]


async def test_spawns_description_lists_the_agent_definitions_of_home_and_project(tmp_path: Path) -> None:
    project, home = make_project(tmp_path / "p"), tmp_path / "home"
    (home / "agents").mkdir(parents=True)
    (project / ".loom" / "agents").mkdir(parents=True)
    (home / "agents" / "mine.md").write_text(
        "---\nname: tester\ndescription: Runs the tests and says which fail.\n---\n"
    )
    (project / ".loom" / "agents" / "rev.md").write_text("---\nname: diff-checker\ndescription: Checks a diff.\n---\n")

    @contextlib.asynccontextmanager
    async def never() -> AsyncIterator[LoomClient]:
        raise AssertionError("listing tools must not reach the face")
        yield  # pragma: no cover

    described: dict[str, str] = {}
    for where in (project, None):
        server = build_server(never, session_id="s_parent", cwd=project, home=home, project=where)
        async with Client(server) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
        described[str(where)] = tools["spawn"].description or ""
        assert tools["wait"].annotations is not None and tools["wait"].annotations.read_only_hint
        assert tools["spawn"].annotations is not None and not tools["spawn"].annotations.read_only_hint

    assert "- diff-checker: Checks a diff." in described[str(project)]
    assert "- tester: Runs the tests and says which fail." in described[str(project)]
    assert "diff-checker" not in described["None"]  # per server: what this session's project defines
    assert all(f"- {role}:" in described["None"] for role in ("planner", "executor", "reviewer"))  # built in


async def test_the_standalone_server_without_a_daemon_says_to_start_one(tmp_path: Path) -> None:
    from tests.clients.cli_support import run_loom

    done = await anyio.to_thread.run_sync(
        lambda: run_loom("server", "subagents", cwd=tmp_path, home=tmp_path / "home", timeout_s=60)
    )
    assert done.returncode == 2, done
    assert "start `loom serve` first" in done.stderr
    assert json.dumps(done.stdout) == '""'  # nothing on the MCP wire


async def test_the_servers_calls_share_one_connection_and_a_broken_one_is_replaced(tmp_path: Path) -> None:
    project, home = make_project(tmp_path / "p"), tmp_path / "home"
    write_script(project / "s.json", READS)
    async with open_client(home, cwd=project) as live:
        async with open_client(tmp_path / "other-home", cwd=project) as gone:
            stale = gone  # closed when this block ends: calls on it fail as on a daemon that went away
        opened: list[LoomClient] = []

        @contextlib.asynccontextmanager
        async def connect() -> AsyncIterator[LoomClient]:
            loom = stale if not opened else live
            opened.append(loom)
            yield loom

        server = build_server(connect, session_id=None, cwd=project, home=home, project=project)
        async with Client(server) as client:
            broken = await client.call_tool("spawn", {"goal": "x", "model": "scripted:s.json"})
            spawned = data(await client.call_tool("spawn", {"goal": "x", "model": "scripted:s.json"}))
            data(await client.call_tool("result", {"child_id": spawned["child_id"]}))
            data(await client.call_tool("wait", {"timeout_s": 30}))

    assert "the connection to Loom failed" in error(broken) and "try again" in error(broken)
    assert opened == [stale, live]  # three calls after the failure, one connection


async def test_a_wait_for_many_children_shares_one_budget_of_answer_text(tmp_path: Path) -> None:
    long = "w" * 20_000
    async with subagents(tmp_path, [{"text": long}]) as (client, _loom, _project):
        spec = {"goal": "write a lot", "model": "scripted:s.json"}
        data(await client.call_tool("spawn_many", {"children": [spec, spec, spec]}))
        waited = data(await client.call_tool("wait", {"timeout_s": 30}))
        one = data(await client.call_tool("result", {"child_id": waited["finished"][0]["child_id"]}))

    assert len(waited["finished"]) == 3
    assert all(2_600 <= len(c["final_text"]) < 2_800 for c in waited["finished"])  # 8,000 shared by 3
    assert "gives up to 12,000" in waited["finished"][0]["final_text"]
    assert 12_000 <= len(one["final_text"]) < 12_200


async def test_a_child_waiting_for_an_approval_is_reported_so_and_answerable(tmp_path: Path) -> None:
    writes: list[dict[str, Any]] = [
        {"text": "Writing.", "tool_calls": [{"name": "fs__write", "arguments": {"path": "out.txt", "content": "x"}}]},
        {"text": "Wrote it."},
    ]
    async with subagents(tmp_path, writes) as (client, loom, project):
        spawned = data(await client.call_tool("spawn", {"goal": "write out.txt", "model": "scripted:s.json"}))
        waited = data(await client.call_tool("wait", {"timeout_s": 1.5}))
        (asking,) = waited["running"]
        await loom.decide_approval(asking["pending_approvals"][0], "approve_once", decided_by="test")
        done = data(await client.call_tool("wait", {"child_ids": [spawned["child_id"]], "timeout_s": 30}))

    assert asking["status"] == "awaiting_approval" and asking["current_tool"] == "fs__write"
    assert spawned["child_id"] in waited["note"] and "approval" in waited["note"]
    (result,) = done["finished"]
    assert result["status"] == "completed" and result["summary"]["files_changed"] == ["out.txt"]
    assert (project / "out.txt").read_text() == "x"


async def test_a_model_spawning_in_a_loop_is_stopped_at_the_bound_of_children_going(tmp_path: Path) -> None:
    project, home = make_project(tmp_path / "p"), tmp_path / "home"
    write_script(project / "hang.json", [{"text": "still thinking", "delay_s": 30}])
    write_script(project / "quick.json", [{"text": "done"}])
    async with open_client(home, cwd=project) as loom:

        @contextlib.asynccontextmanager
        async def connect() -> AsyncIterator[LoomClient]:
            yield loom

        server = build_server(connect, session_id=None, cwd=project, home=home, project=project, max_going=2)
        async with Client(server) as client:
            hang = {"goal": "hang", "model": "scripted:hang.json"}
            many = data(await client.call_tool("spawn_many", {"children": [hang, hang, hang]}))
            refused = await client.call_tool("spawn", {"goal": "one more", "model": "scripted:quick.json"})
            first = many["children"][0]["child_id"]
            data(await client.call_tool("cancel", {"child_id": first}))
            again = data(await client.call_tool("spawn", {"goal": "now there is room", "model": "scripted:quick.json"}))
            for entry in many["children"][1:2]:
                await client.call_tool("cancel", {"child_id": entry["child_id"]})

    assert [e["started"] for e in many["children"]] == [True, True, False]
    assert "2 of your children are still going" in many["children"][2]["error"]
    assert "wait for them or cancel some" in error(refused)
    assert again["status"] in ("queued", "running", "completed")


async def test_a_follow_up_is_a_new_run_of_the_child_and_its_result_is_that_runs(tmp_path: Path) -> None:
    turns: list[dict[str, Any]] = [*READS, {"text": "The blue widgets are in main.py.", "delay_s": 1.0}]
    async with subagents(tmp_path, turns) as (client, _loom, _project):
        spawned = data(await client.call_tool("spawn", {"goal": "read the README", "model": "scripted:s.json"}))
        (first,) = data(await client.call_tool("wait", {"timeout_s": 30}))["finished"]
        follow = data(await client.call_tool("send", {"child_id": spawned["child_id"], "message": "which are blue?"}))
        busy = await client.call_tool("send", {"child_id": spawned["child_id"], "message": "and red?"})
        (second,) = data(await client.call_tool("wait", {"timeout_s": 30}))["finished"]

    assert first["final_text"] == ANSWER
    assert follow["child_id"] == spawned["child_id"] and follow["run_id"] != spawned["run_id"]
    assert "is still" in error(busy) and "wait for it or cancel it" in error(busy)  # running or queued
    assert second["run_id"] == follow["run_id"] and second["final_text"] == "The blue widgets are in main.py."
    assert second["steps"] == 1  # this run's, not the child's whole history
