"""``loom run`` with the bundled demo, ``--json``, ``loom export`` and ``loom runs``, as real subprocesses."""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from orchestrator.events import (
    AssistantMessage,
    Event,
    Notice,
    RunFinished,
    RunStarted,
    SessionCreated,
    TextDelta,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from orchestrator.messages import ToolUseBlock
from orchestrator.models import DEMO_SCRIPT
from tests.clients.cli_support import CliResult, make_project, run_loom


def _demo_turns() -> list[dict[str, object]]:
    turns: list[dict[str, object]] = json.loads(DEMO_SCRIPT.read_text(encoding="utf-8"))["turns"]
    return turns


def _demo_tool_names() -> list[str]:
    names: list[str] = []
    for turn in _demo_turns():
        calls = turn.get("tool_calls", [])
        assert isinstance(calls, list)
        names.extend(str(call["name"]) for call in calls)
    return names


@dataclass(frozen=True)
class DemoRun:
    project: Path
    home: Path
    result: CliResult


@pytest.fixture(scope="module")
def demo_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, DemoRun]:
    """The demo run twice at the same time (the suite is CPU-bound and serial otherwise): as is, and ``--json``."""
    base = tmp_path_factory.mktemp("demo")
    flags = {"terminal": [], "json": ["--json"]}

    def one(mode: str) -> DemoRun:
        project = make_project(base / mode / "project")
        home = base / mode / "home"
        return DemoRun(project, home, run_loom("run", *flags[mode], "explore", cwd=project, home=home))

    with ThreadPoolExecutor(len(flags)) as pool:
        return dict(zip(flags, pool.map(one, flags), strict=True))


def test_demo_runs_without_api_key_and_writes_a_report(demo_runs: dict[str, DemoRun]) -> None:
    project, result = demo_runs["terminal"].project, demo_runs["terminal"].result

    assert result.returncode == 0, result
    # The assistant's words reach stdout whole, even though they are streamed in pieces.
    for turn in _demo_turns():
        assert str(turn.get("text", "")) in result.stdout, result
    # One line per tool call. The run is headless in accept-edits mode: file reads and the report's write
    # run, while the shell call, which would need someone's approval, is denied and the model told why.
    tool_lines = [line for line in result.stdout.splitlines() if line.startswith("  ✓ ") or line.startswith("  ✗ ")]
    assert sorted(line.split()[1] for line in tool_lines) == sorted(_demo_tool_names()), result
    assert all(line.startswith("  ✓ ") for line in tool_lines if " fs__" in line), result
    (shell_line,) = [line for line in tool_lines if " shell__run " in line]
    assert shell_line.startswith("  ✗ ") and "denied by policy" in shell_line and "headless" in shell_line, result
    # stderr says plainly that this was the scripted demo and how to use a real model.
    assert "scripted demo model" in result.stderr, result
    assert "ANTHROPIC_API_KEY" in result.stderr, result
    assert "--model openai:" in result.stderr, result
    assert re.search(r"^loom: run r_\w+ completed in 6 steps$", result.stderr, re.MULTILINE), result
    assert "Traceback" not in result.stderr, result
    # The report lands in the project directory and is about what was actually found there.
    report = (project / "loom-report.md").read_text(encoding="utf-8")
    assert "Acme Widget Toolkit" in report  # the README's first line
    assert "pkg/gears.py" in report  # the Python files
    assert "handle the blue widgets" in report  # the TODO marker
    assert "denied by policy" in report  # what the model was told about the shell call


@dataclass(frozen=True)
class DemoJsonRun:
    project: Path
    home: Path
    result: CliResult
    events: list[Event]

    @property
    def run_id(self) -> str:
        last = self.events[-1]
        assert isinstance(last, RunFinished)
        return last.run_id


@pytest.fixture(scope="module")
def demo_json(demo_runs: dict[str, DemoRun]) -> DemoJsonRun:
    """The ``--json`` demo run, its events parsed (every line validated with EVENT_ADAPTER)."""
    run = demo_runs["json"]
    assert run.result.returncode == 0, run.result
    return DemoJsonRun(run.project, run.home, run.result, run.result.events())


@pytest.fixture(scope="module")
def queries(demo_json: DemoJsonRun) -> dict[str, CliResult]:
    """``loom export RUN``, ``loom export UNKNOWN`` and ``loom runs`` on the demo's store, run at the same time."""
    commands = {"export": ["export", demo_json.run_id], "unknown": ["export", "r_doesnotexist"], "runs": ["runs"]}
    with ThreadPoolExecutor(len(commands)) as pool:
        futures = {
            name: pool.submit(run_loom, *args, cwd=demo_json.project, home=demo_json.home)
            for name, args in commands.items()
        }
        return {name: future.result() for name, future in futures.items()}


def test_json_output_is_one_valid_event_per_line(demo_json: DemoJsonRun) -> None:
    # parse_events validated every line with EVENT_ADAPTER; nothing else may be on stdout.
    assert len(demo_json.events) == len(demo_json.result.stdout.splitlines())
    assert demo_json.result.stderr == "", demo_json.result
    assert len({e.session_id for e in demo_json.events}) == 1


def test_json_stream_starts_with_session_and_ends_with_completed_run(demo_json: DemoJsonRun) -> None:
    events = demo_json.events
    assert isinstance(events[0], SessionCreated)
    assert events[0].cwd == str(demo_json.project.resolve())
    assert any(isinstance(e, Notice) and "scripted demo model" in e.text for e in events)
    assert isinstance(events[-1], RunFinished)
    assert events[-1].status == "completed"
    assert events[-1].reason == "end_turn"
    assert events[-1].steps == 6
    assert sum(isinstance(e, RunStarted) for e in events) == 1


def test_json_stored_events_have_gapless_increasing_seq(demo_json: DemoJsonRun) -> None:
    stored = [e for e in demo_json.events if e.seq is not None]
    assert [e.seq for e in stored] == list(range(1, len(stored) + 1))
    # Only live deltas go unnumbered: the text, and each tool call's arguments (whole, as the stored call has them).
    assert all(isinstance(e, TextDelta | ToolCallDelta) for e in demo_json.events if e.seq is None)
    assert any(isinstance(e, TextDelta) for e in demo_json.events)
    calls = [
        b for e in stored if isinstance(e, AssistantMessage) for b in e.message.content if isinstance(b, ToolUseBlock)
    ]
    pieces = [e for e in demo_json.events if isinstance(e, ToolCallDelta)]
    assert [(e.call_id, e.name) for e in pieces if e.call_id] == [(c.id, c.name) for c in calls]
    assert [json.loads(e.arguments) for e in pieces] == [c.input for c in calls]


def test_json_tool_call_started_precedes_its_finish(demo_json: DemoJsonRun) -> None:
    events = demo_json.events
    started = {e.call_id: i for i, e in enumerate(events) if isinstance(e, ToolCallStarted)}
    finished = {e.call_id: i for i, e in enumerate(events) if isinstance(e, ToolCallFinished)}
    # A call refused by policy never starts: it has only its finish, marked denied.
    refused = {e.call_id for e in events if isinstance(e, ToolCallFinished) and e.failure == "denied"}
    assert {events[i].tool for c, i in finished.items() if c in refused} == {"shell__run"}  # type: ignore[union-attr]
    assert started.keys() == finished.keys() - refused
    assert len(started) + len(refused) == len(_demo_tool_names())
    for call_id, index in started.items():
        assert index < finished[call_id], call_id
        start, finish = events[index], events[finished[call_id]]
        assert isinstance(start, ToolCallStarted) and isinstance(finish, ToolCallFinished)
        assert start.tool == finish.tool
        assert not finish.is_error, finish


def test_export_prints_the_runs_stored_events(demo_json: DemoJsonRun, queries: dict[str, CliResult]) -> None:
    run_id = demo_json.run_id
    result = queries["export"]

    assert result.returncode == 0, result
    exported = result.events()
    live_stored = [e for e in demo_json.events if e.seq is not None and getattr(e, "run_id", None) == run_id]
    assert [e.seq for e in exported] == [e.seq for e in live_stored]
    assert exported == live_stored
    assert isinstance(exported[-1], RunFinished) and exported[-1].status == "completed"


def test_export_of_an_unknown_run_is_a_usage_error(queries: dict[str, CliResult]) -> None:
    result = queries["unknown"]

    assert result.returncode == 2, result
    assert result.stdout == ""
    assert "r_doesnotexist" in result.stderr
    assert "loom runs" in result.stderr  # tells the user where to find valid ids
    assert "Traceback" not in result.stderr


def test_runs_lists_the_run(demo_json: DemoJsonRun, queries: dict[str, CliResult]) -> None:
    result = queries["runs"]

    assert result.returncode == 0, result
    header, *lines = result.stdout.splitlines()
    assert header.startswith("RUN "), result
    assert len(lines) == 1, result
    assert lines[0].startswith(demo_json.run_id)
    assert "completed" in lines[0]
    assert "scripted:" in lines[0]
