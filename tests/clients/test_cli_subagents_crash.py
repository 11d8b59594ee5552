"""The issue's crash guarantee for the subagents tools: a ``loom serve`` daemon SIGKILLed while a parent waits for
its children, one finished and one still thinking; restarted with ``autoResume``, the children resume like any
run: the finished one is not run again, the other's run carries on under its own id, and the parent's re-run wait
waits for it.

Each child appends one line to a file of its own (through the shell), so a test counts how often its work ran. A
scripted model restarts its script when its session is reopened, so the parent's script is swapped after the kill:
its resumed run re-runs the wait (a read-only call) and then makes its next model call, which is the new script's
first turn. The slow child is killed before its append; its script, also played from the start when it resumes,
appends and answers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from tests.clients.cli_support import write_script
from tests.mcp_calls import call
from tests.orchestrator.daemon.daemon_process import mcp_client, start_daemon

pytestmark = pytest.mark.anyio

WAIT = "subagents__wait"


def child_turns(name: str, *, delay_s: float = 0.0) -> list[dict[str, Any]]:
    """A child: (after ``delay_s`` of thinking) appends one line to ``NAME.txt``, then answers."""
    append = {"name": "shell__run", "arguments": {"command": f"echo ran >> {name}.txt"}}
    return [{"delay_s": delay_s, "tool_calls": [append]}, {"text": f"{name} appended."}]


def lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines()) if path.exists() else 0


async def events_of(client: Client, session_id: str) -> list[dict[str, Any]]:
    """Every stored event of a session, oldest first."""
    events: list[dict[str, Any]] = []
    after = 0
    while True:
        page = await call(client, "read_events", session_id=session_id, after_seq=after, limit=1000)
        events.extend(page["events"])
        if not page["events"] or page["next_after_seq"] <= after:
            return events
        after = page["next_after_seq"]


async def until(client: Client, session_id: str, check: Any, within_s: float = 30) -> list[dict[str, Any]]:
    """The session's events once ``check(events)`` holds, read again whenever its stream moves."""
    events: list[dict[str, Any]] = []
    after = 0
    with anyio.fail_after(within_s):
        while not check(events):
            page = await call(client, "read_events", session_id=session_id, after_seq=after, wait_s=5, limit=1000)
            events.extend(page["events"])
            after = page["next_after_seq"]
    return events


def spawned(events: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """spawn_many's entries (child_id, run_id), once its result is on the parent's stream."""
    for e in events:
        if e["type"] == "tool_call_finished" and e["tool"] == "subagents__spawn_many":
            assert not e["is_error"], e["content"]
            children: list[dict[str, Any]] = e["structured"]["children"]
            return children
    return None


def of_child(events: list[dict[str, Any]], kind: str, child_id: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind and e.get("child_session_id") == child_id]


async def test_a_daemon_killed_while_a_parent_waits_resumes_the_slow_child_and_not_the_finished_one(
    tmp_path: Path,
) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (home / "config.json").write_text(json.dumps({"autoResume": True}), encoding="utf-8")
    quick = write_script(tmp_path / "a.json", child_turns("a"))
    # The slow child thinks far longer than the test needs: the kill lands in its thinking, whatever the load.
    slow = write_script(tmp_path / "b.json", child_turns("b", delay_s=60))
    children = [
        {"goal": "Append to a.txt.", "model": f"scripted:{quick}", "timeout_s": 120},
        {"goal": "Append to b.txt.", "model": f"scripted:{slow}", "timeout_s": 120},
    ]
    parent = write_script(
        tmp_path / "parent.json",
        [
            {"tool_calls": [{"name": "subagents__spawn_many", "arguments": {"children": children}}]},
            {"tool_calls": [{"name": WAIT, "arguments": {"mode": "all", "timeout_s": 120}}]},
            {"text": "Not reached: the daemon dies during the wait."},
        ],
    )
    daemon = start_daemon(home, tmp_path)
    try:
        async with mcp_client(daemon, "auto") as client:
            session = await call(client, "create_session", cwd=str(work), model=f"scripted:{parent}", mode="bypass")
            sid = session["session_id"]
            run = await call(client, "send_message", session_id=sid, text="Have two children append a line each.")
            first = await until(client, sid, lambda ev: spawned(ev) is not None)
            entries = spawned(first)
            assert entries is not None and [e["started"] for e in entries] == [True, True], entries
            a, b = entries[0], entries[1]

            def waiting_mid_b(ev: list[dict[str, Any]]) -> bool:
                return (
                    bool(of_child(ev, "child_finished", a["child_id"]))
                    and bool(of_child(ev, "child_started", b["child_id"]))
                    and any(e["type"] == "tool_call_started" and e["tool"] == WAIT for e in ev)
                )

            before = await until(client, sid, waiting_mid_b)
    finally:
        daemon.proc.kill()  # SIGKILL: nothing is closed or recorded on the way out
        daemon.proc.wait(timeout=10)
        daemon.stop()
    assert [e["status"] for e in of_child(before, "child_finished", a["child_id"])] == ["completed"]
    assert not of_child(before, "child_finished", b["child_id"]), "the slow child must still be going at the kill"
    assert (lines(work / "a.txt"), lines(work / "b.txt")) == (1, 0)
    # Reopened, the parent's model plays its script from the start: after the re-run wait it just answers. The slow
    # child's resumed run plays its script from the start too: it thinks a little (the parent has to wait), appends.
    write_script(parent, [{"text": "Both children appended."}])
    write_script(slow, child_turns("b", delay_s=2))

    second = start_daemon(home, tmp_path, log_name="second")
    try:
        async with mcp_client(second, "auto") as client:
            with anyio.fail_after(45):
                done = await call(client, "get_run", run_id=run["run_id"], wait_s=40)
            after = await events_of(client, sid)
            kids = [s for s in (await call(client, "list_sessions"))["sessions"] if s.get("parent_session_id") == sid]
            child_events = {k["session_id"]: await events_of(client, k["session_id"]) for k in kids}
    finally:
        second.stop()
    assert done["status"] == "completed", done
    assert done["final_text"] == "Both children appended."
    assert sorted(k["session_id"] for k in kids) == sorted([a["child_id"], b["child_id"]])  # no child spawned again
    # The wait the resumed parent ran again reports both children completed.
    waits = [e for e in after if e["type"] == "tool_call_finished" and e["tool"] == WAIT]
    assert len(waits) == 1, waits  # the killed wait left no result: this is the re-run's
    result = waits[0]["structured"]
    assert result["running"] == [] and not result["timed_out"], waits[0]["content"]
    assert {s["child_id"]: s["status"] for s in result["finished"]} == {
        a["child_id"]: "completed",
        b["child_id"]: "completed",
    }, waits[0]["content"]
    # The finished child ran once; the slow one's run is the same run, resumed, not sent again.
    runs = {cid: [e["run_id"] for e in ev if e["type"] == "run_started"] for cid, ev in child_events.items()}
    assert runs == {a["child_id"]: [a["run_id"]], b["child_id"]: [b["run_id"]]}, runs
    assert not [e for e in child_events[a["child_id"]] if e["type"] == "run_resumed"]
    assert [e["run_id"] for e in child_events[b["child_id"]] if e["type"] == "run_resumed"] == [b["run_id"]]
    assert (lines(work / "a.txt"), lines(work / "b.txt")) == (1, 1)  # each child's append ran exactly once
    # The parent's stream shows the slow child finishing after the restart, under its own run id.
    seen = max(e["seq"] for e in before)
    ends = [e for e in of_child(after, "child_finished", b["child_id"]) if e["seq"] > seen]
    assert [(e["child_run_id"], e["status"]) for e in ends] == [(b["run_id"], "completed")], ends
