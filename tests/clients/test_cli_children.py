"""Children on the command line: `loom attach`'s lines, `loom trace`'s entries and `loom sessions`' tree."""

from __future__ import annotations

import io

import pytest

from clients.cli.render import TerminalRenderer
from clients.cli.sessions import _list_sessions
from clients.timeline import build_timeline, render_timeline
from orchestrator.events import (
    ApprovalDecided,
    ApprovalRequested,
    ChildActivity,
    ChildFinished,
    ChildStarted,
    Event,
    RunFinished,
    RunStarted,
)
from orchestrator.protocol import SessionInfo

PARENT, RUN, TS = "s_parent000001", "r_parent000001", 1_700_000_000.0
REVIEWER, TESTER = "s_1a2b3c4d5e6f", "s_9f8e7d6c5b4a"


def fan_out() -> list[Event]:
    """A parent's run that starts two children: one completes, one times out after asking for an approval."""
    base = {"session_id": PARENT, "run_id": RUN}
    return [
        RunStarted(**base, ts=TS, model="scripted:p", max_steps=50),
        ChildStarted(
            **base,
            ts=TS + 1,
            child_session_id=REVIEWER,
            child_run_id="r_rev",
            agent="reviewer",
            goal="Review the diff\nin src/ and report",
        ),
        ChildStarted(
            **base, ts=TS + 1, child_session_id=TESTER, child_run_id="r_test", agent="\x1b[2Jtester", goal="Run tests"
        ),
        ChildActivity(**base, ts=TS + 2, child_session_id=REVIEWER, child_run_id="r_rev", step=1, tool="fs__read"),
        ApprovalRequested(
            **base,
            ts=TS + 2,
            approval_id="ap_1",
            call_id="c_1",
            tool="shell__run",
            arguments={"command": "pytest"},
            reason="ask mode asks first",
            child_session_id=TESTER,
        ),
        ApprovalDecided(
            **base, ts=TS + 3, approval_id="ap_1", decision="approve_once", decided_by="cli", child_session_id=TESTER
        ),
        ChildFinished(
            **base,
            ts=TS + 5,
            child_session_id=REVIEWER,
            child_run_id="r_rev",
            status="completed",
            reason="",
            steps=2,
            elapsed_s=4.0,
            final_text="Two findings.\nsrc/a.py:3 is wrong",
        ),
        ChildFinished(
            **base,
            ts=TS + 9,
            child_session_id=TESTER,
            child_run_id="r_test",
            status="failed",
            reason="timed out after 8s",
            steps=1,
            elapsed_s=8.0,
            final_text="",
        ),
        RunFinished(**base, ts=TS + 10, status="completed", reason="", final_text="done", steps=2),
    ]


def test_attach_prints_each_child_event_as_one_short_line_naming_the_child() -> None:
    out, err = io.StringIO(), io.StringIO()
    render = TerminalRenderer(out, err)
    for event in fan_out():
        render(event)
    lines = [line for line in err.getvalue().splitlines() if "child" in line]
    assert lines == [
        f"loom: child 'reviewer' {REVIEWER} started: Review the diff",
        f"loom: child '[2Jtester' {TESTER} started: Run tests",
        f"loom: child 'reviewer' {REVIEWER} step 1: fs__read",
        f"loom: child 'reviewer' {REVIEWER} completed (2 steps, 4.0s): Two findings.",
        f"loom: child '[2Jtester' {TESTER} failed (1 step, 8.0s): timed out after 8s",
    ]
    assert "\x1b" not in err.getvalue()  # an agent's name is anyone's text: no escape reaches the terminal


def test_trace_shows_each_child_with_its_time_status_and_tools_and_whose_approval_it_was() -> None:
    entries = build_timeline(fan_out(), RUN)
    children = [e for e in entries if e.kind == "child"]
    assert [(e.name, e.status, e.duration_ms, e.at_s) for e in children] == [
        ("reviewer", "completed", 4000.0, 1.0),
        ("\x1b[2Jtester", "failed", 8000.0, 1.0),
    ]
    assert children[1].detail == f"{TESTER}: Run tests (timed out after 8s)"
    (tool,) = [e for e in entries if e.kind == "child_tool"]
    assert (tool.name, tool.step, tool.detail) == ("fs__read", 1, f"child 'reviewer' {REVIEWER}")
    (approval,) = [e for e in entries if e.kind == "approval"]
    assert approval.status == "approve_once" and f"(child {TESTER})" in approval.detail
    text = render_timeline({"run_id": RUN, "session_id": PARENT, "status": "completed"}, entries)
    assert "ch.tool" in text and "reviewer" in text


def test_a_child_still_running_when_traced_is_unfinished() -> None:
    events = [e for e in fan_out() if not isinstance(e, ChildFinished | RunFinished)]
    children = [e for e in build_timeline(events, RUN) if e.kind == "child"]
    assert {(e.name, e.status) for e in children} == {("reviewer", "unfinished"), ("\x1b[2Jtester", "unfinished")}


def _info(sid: str, parent: str = "", agent: str = "", title: str = "") -> SessionInfo:
    return SessionInfo(
        session_id=sid,
        cwd="/w",
        model="scripted:m",
        mode="ask",
        archived=False,
        last_seq=1,
        parent_session_id=parent,
        agent=agent,
        title=title,
    )


def test_loom_sessions_lists_children_indented_under_their_parent_in_the_order_started(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # newest first, as list_sessions gives them: the grandchild, the two children, their parent, another session
    rows = [
        _info("s_grandchild01", parent="s_child2000001", agent="helper"),
        _info("s_child2000001", parent=PARENT, agent="tester"),
        _info("s_child1000001", parent=PARENT, agent="reviewer", title="look at the diff"),
        _info(PARENT, title="ship it"),
        _info("s_orphan000001", parent="s_archived0001", agent="x"),
        _info("s_other0000001"),
    ]
    assert _list_sessions(rows) == 0
    lines = capsys.readouterr().out.splitlines()
    firsts = [line.split("  idle")[0].rstrip() for line in lines[1:]]
    assert firsts == [
        PARENT,
        "└ s_child1000001",
        "└ s_child2000001",
        "  └ s_grandchild01",
        "s_orphan000001",  # its parent is not listed (archived): it stays at the top
        "s_other0000001",
    ]
    by_id = {line.replace("└", "").split()[0]: line for line in lines[1:]}
    assert "[reviewer] look at the diff" in by_id["s_child1000001"] and "[tester]" in by_id["s_child2000001"]
    assert len({line.index("/w") for line in lines[1:]}) == 1  # the columns stay aligned
