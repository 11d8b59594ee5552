"""The face's review tools over the real face in-process: scripted reviewers, real git repositories, SQLite."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from orchestrator.face.server import build_face
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.host import SessionHost
from tests.mcp_calls import call, error_of
from tests.orchestrator.agents.test_review import git, repo_with_commit

pytestmark = pytest.mark.anyio

FINDINGS = [
    {"file": "calc.py", "line": 2, "severity": "error", "message": "subtracts instead of adding"},
    {"file": "../../etc/passwd", "line": 1, "severity": "error", "message": "look here"},
]


def verdict(verdict: str, findings: Sequence[Mapping[str, Any]]) -> str:
    return "Reviewed.\n```json\n" + json.dumps({"verdict": verdict, "findings": list(findings)}) + "\n```"


def reviewer(tmp_path: Path, turns: Sequence[Mapping[str, Any]], name: str = "reviewer.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps({"turns": list(turns)}))
    return f"scripted:{path}"


@contextlib.asynccontextmanager
async def face(tmp_path: Path) -> AsyncIterator[tuple[SessionHost, Client]]:
    async with embedded_runtime(tmp_path / "home") as runtime, SessionHost(runtime) as host:
        async with Client(build_face(host)) as client:
            yield host, client


def changed_repo(tmp_path: Path) -> Path:
    repo = repo_with_commit(tmp_path / "repo")
    (repo / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (repo / "notes.txt").write_text("new\n")
    return repo


async def test_a_review_of_a_scripted_change_returns_findings_at_file_and_line(tmp_path: Path) -> None:
    repo = changed_repo(tmp_path)
    model = reviewer(tmp_path, [{"text": verdict("changes_needed", FINDINGS)}])
    async with face(tmp_path) as (host, client):
        done = await call(client, "review", cwd=str(repo), model=model, wait_s=30)
        sessions = {s["session_id"]: s for s in (await call(client, "list_sessions"))["sessions"]}
        brief = list(await host.runtime.log.store.read_events(done["reviewer_session_id"]))
    assert done["status"] == "reviewed" and done["verdict"] == "changes_needed", done
    assert done["findings"][0] == FINDINGS[0]
    assert done["findings"][1]["file"] == "" and "outside the reviewed tree" in done["findings"][1]["message"]
    assert done["files"] == ["calc.py", "notes.txt"] and done["target"] == "the uncommitted changes"
    child, parent = sessions[done["reviewer_session_id"]], sessions[done["session_id"]]
    assert (child["agent"], child["mode"], child["parent_session_id"]) == ("reviewer", "plan", parent["session_id"])
    assert parent["mode"] == "plan" and parent["title"].startswith("review: ")
    (message,) = [e for e in brief if e.type == "user_message"]
    assert "return a - b" in message.text and "- notes.txt" in message.text  # the diff and the untracked file


async def test_no_change_says_so_and_starts_no_reviewer(tmp_path: Path) -> None:
    repo = repo_with_commit(tmp_path / "repo")
    async with face(tmp_path) as (_, client):
        done = await call(client, "review", cwd=str(repo), model="scripted:demo")
        sessions = (await call(client, "list_sessions"))["sessions"]
    assert done["status"] == "nothing_to_review" and done["verdict"] == "" and "nothing to review" in done["detail"]
    assert sessions == []


async def test_outside_git_and_bad_arguments_are_clear_errors(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    async with face(tmp_path) as (_, client):
        plain = await error_of(client, "review", cwd=str(tmp_path / "plain"))
        neither = await error_of(client, "review")
        both = await error_of(client, "review", cwd=str(tmp_path), target="HEAD", run_id="r_x")
        not_review = await error_of(client, "review_result", run_id="r_nope")
    assert "is not in a git repository" in plain
    assert "give cwd" in neither and "not both" in both and "no run 'r_nope'" in not_review


async def test_the_reviewer_cannot_change_the_tree_whatever_its_definition_or_parent_allows(tmp_path: Path) -> None:
    repo = changed_repo(tmp_path)
    # A project reviewer that asks for every tool and bypass, under a parent in bypass: still read-only.
    (repo / ".loom" / "agents").mkdir(parents=True)
    (repo / ".loom" / "agents" / "reviewer.md").write_text(
        "---\nname: reviewer\ndescription: reviews\ntools: Read, Write, Edit, Bash\npermissionMode: bypassPermissions\n"
        "---\nReview it.\n"
    )
    git(repo, "add", ".loom")
    git(repo, "commit", "-qm", "agents")
    writes = [
        {"name": "fs__write", "arguments": {"path": "calc.py", "content": "pwned\n"}},
        {"name": "fs__edit", "arguments": {"path": "calc.py", "old": "a - b", "new": "a + b"}},
        {"name": "shell__run", "arguments": {"command": "touch hacked.txt"}},
    ]
    model = reviewer(tmp_path, [{"tool_calls": writes}, {"text": verdict("pass", [])}])
    async with face(tmp_path) as (host, client):
        parent = await call(client, "create_session", cwd=str(repo), model="scripted:demo", mode="bypass")
        done = await call(client, "review", session_id=parent["session_id"], model=model, wait_s=30)
        events = await host.runtime.log.store.read_events(done["reviewer_session_id"])
        shown = await host.runtime.log.store.read_events(parent["session_id"])
    assert done["session_id"] == parent["session_id"] and done["status"] == "reviewed"
    # The review shows on the parent's stream like any child's work.
    assert {e.type for e in shown} >= {"child_started", "child_finished"}
    finished = [e for e in events if e.type == "tool_call_finished"]
    assert [(e.tool, e.is_error) for e in finished] == [("fs__write", True), ("fs__edit", True), ("shell__run", True)]
    assert all("plan mode is read-only" in e.content for e in finished), [e.content for e in finished]
    assert (repo / "calc.py").read_text() == "def add(a, b):\n    return a - b\n" and not (repo / "hacked.txt").exists()


async def test_a_review_still_going_is_waited_for_with_review_result(tmp_path: Path) -> None:
    repo = changed_repo(tmp_path)
    model = reviewer(tmp_path, [{"delay_s": 1.0, "text": verdict("pass", [])}])
    async with face(tmp_path) as (_, client):
        started = await call(client, "review", cwd=str(repo), model=model)
        with anyio.fail_after(30):
            done = await call(client, "review_result", run_id=started["run_id"], wait_s=20)
        again = await error_of(client, "review", cwd=str(repo), target="calc.py", run_id=started["run_id"])
        going = await call(client, "review", cwd=str(repo), model=model)
        still = await error_of(client, "review", run_id=going["run_id"])
    assert started["status"] == "running" and started["verdict"] == "" and started["run_id"]
    assert done["status"] == "reviewed" and done["verdict"] == "pass" and done["findings"] == []
    assert done["target"] == "the uncommitted changes" and "not both" in again
    assert "is running; review it once it has ended" in still


async def test_an_unreadable_or_failed_reviewer_is_never_a_pass(tmp_path: Path) -> None:
    repo = changed_repo(tmp_path)
    rambling = reviewer(tmp_path, [{"text": "It all looks great, ship it! " * 20_000}], "rambling.json")
    broken = reviewer(tmp_path, [{"error": "permanent:the model is down"}], "broken.json")
    async with face(tmp_path) as (_, client):
        unread = await call(client, "review", cwd=str(repo), model=rambling, wait_s=30)
        failed = await call(client, "review", cwd=str(repo), model=broken, wait_s=30)
    assert unread["status"] == "reviewed" and unread["verdict"] == "changes_needed"
    assert "no verdict" in unread["findings"][0]["message"] and len(unread["findings"][0]["message"]) <= 1_000
    assert failed["status"] == "failed" and failed["verdict"] == "" and "the model is down" in failed["detail"]


async def test_a_run_is_reviewed_against_its_goal_from_its_events(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()  # no git needed: a run's events say what it did
    worker = reviewer(
        tmp_path,
        [
            {"tool_calls": [{"name": "fs__write", "arguments": {"path": "hello.py", "content": "print('hi')\n"}}]},
            {"text": "Wrote hello.py, which greets the world."},
        ],
        "worker.json",
    )
    model = reviewer(
        tmp_path,
        [{"text": verdict("changes_needed", [{"file": "hello.py", "line": 1, "message": "greets nobody"}])}],
    )
    async with face(tmp_path) as (host, client):
        session = await call(client, "create_session", cwd=str(work), model=worker, mode="bypass")
        run = await call(client, "send_message", session_id=session["session_id"], text="write a greeter", wait_s=30)
        done = await call(client, "review", run_id=run["run_id"], model=model, wait_s=30)
        events = await host.runtime.log.store.read_events(done["reviewer_session_id"])
    assert done["status"] == "reviewed" and done["target"] == f"run {run['run_id']}"
    assert done["findings"] == [{"file": "hello.py", "line": 1, "severity": "error", "message": "greets nobody"}]
    (brief,) = [e.text for e in events if e.type == "user_message"]
    assert "write a greeter" in brief and "- hello.py" in brief and "Wrote hello.py" in brief
