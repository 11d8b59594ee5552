"""Tool calls that go wrong during a run, and external MCP servers from a ``--config`` file."""

from __future__ import annotations

import re
from pathlib import Path

from orchestrator.events import AssistantMessage, Event, RunFinished, ToolCallFinished
from tests.clients.cli_support import make_project, run_loom, stdio_test_server, write_config, write_script


def _finished_by_call(events: list[Event]) -> dict[str, ToolCallFinished]:
    return {e.call_id: e for e in events if isinstance(e, ToolCallFinished)}


def _step_calls(events: list[Event], step: int) -> list[str]:
    """The ids the model gave its tool calls in ``step``, in the order it asked for them."""
    for e in events:
        if isinstance(e, AssistantMessage) and e.step == step:
            return [use.id for use in e.message.tool_uses]
    raise AssertionError(f"no assistant message for step {step}")


def _final_text(events: list[Event]) -> str:
    last = events[-1]
    assert isinstance(last, RunFinished), last
    return last.final_text


def test_bad_tool_calls_become_error_results_the_model_sees(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    home = tmp_path / "home"
    (tmp_path / "outside.txt").write_text("TOP-SECRET-OUTSIDE\n", encoding="utf-8")
    write_script(
        project / "bad.json",
        [
            {"text": "Trying some questionable calls.", "tool_calls": [
                {"id": "escape", "name": "fs__read", "arguments": {"path": "../outside.txt"}},
                {"id": "types", "name": "fs__read", "arguments": {"path": 42, "start_line": "one"}},
                {"id": "unknown", "name": "fs__teleport", "arguments": {"to": "mars"}},
            ]},
            # The model quotes what it was shown, which proves each error reached it.
            {"text": "escape=[{{result:escape}}] types=[{{result:types}}] unknown=[{{result:unknown}}]"},
        ],
    )  # fmt: skip

    result = run_loom("run", "--json", "--model", "scripted:bad.json", "misbehave", cwd=project, home=home)

    assert result.returncode == 0, result
    events = result.events()
    assert isinstance(events[-1], RunFinished) and events[-1].status == "completed", result
    escape_id, types_id, unknown_id = _step_calls(events, 1)
    finished = _finished_by_call(events)
    assert set(finished) == {escape_id, types_id, unknown_id}
    assert all(f.is_error for f in finished.values())
    assert finished[escape_id].failure == "tool_error"
    assert "outside the allowed roots" in finished[escape_id].content
    assert finished[types_id].failure == "invalid_arguments"
    assert "start_line" in finished[types_id].content
    assert finished[unknown_id].failure == "unknown_tool"
    assert "fs__teleport" in finished[unknown_id].content
    assert "fs__read" in finished[unknown_id].content  # the error lists the tools that do exist
    # What the model said next quotes every error, so it saw them.
    final = _final_text(events)
    assert re.search(r"escape=\[[^]]*outside the allowed roots", final), final
    assert re.search(r"types=\[invalid arguments for fs__read", final), final
    assert re.search(r"unknown=\[unknown tool 'fs__teleport'", final), final
    # Nothing of the file outside the project leaked.
    assert "TOP-SECRET-OUTSIDE" not in result.stdout + result.stderr

    # Every stored event of the run, the refused calls included, can be exported (by a unique id prefix).
    run_id = events[-1].run_id
    exported = run_loom("export", run_id[:9], cwd=project, home=home)
    assert exported.returncode == 0, exported
    stored = [e for e in events if e.seq is not None and getattr(e, "run_id", None) == run_id]
    assert exported.events() == stored
    assert set(_finished_by_call(exported.events())) == {escape_id, types_id, unknown_id}


def test_external_stdio_servers_from_a_config_file(tmp_path: Path) -> None:
    # Two external servers in the standard mcpServers format: one healthy, one that crashes on start.
    project = make_project(tmp_path / "project")
    home = tmp_path / "home"
    write_config(
        project / "servers.json",
        {"ext": stdio_test_server(), "flaky": stdio_test_server(TEST_SERVER_CRASH_ON_START="1")},
    )
    write_script(
        project / "ext.json",
        [
            {"text": "Asking the external servers.", "tool_calls": [
                {"id": "echo", "name": "ext__echo", "arguments": {"text": "ping-", "times": 3}},
                {"id": "flaky", "name": "flaky__echo", "arguments": {"text": "hello"}},
            ]},
            {"text": "ext said {{result:echo}}; done despite the broken server."},
        ],
    )  # fmt: skip

    result = run_loom("run", "--config", "servers.json", "--model", "scripted:ext.json", "go", cwd=project, home=home)

    # The run completes; the broken server costs only its own tools.
    assert result.returncode == 0, result
    assert "ext said ping-ping-ping-; done despite the broken server." in result.stdout, result
    assert re.search(r"^  ✓ ext__echo ", result.stdout, re.MULTILINE), result
    # A call refused before it starts still shows its arguments, so the user can tell which call it was.
    assert re.search(r'^  ✗ flaky__echo \{"text": "hello"\} .*unavailable', result.stdout, re.MULTILINE), result
    # The user is told on stderr which server is down and why, in its own words; the healthy one is not mentioned.
    assert re.search(r"^loom: warning: MCP server 'flaky' is unavailable: .+", result.stderr, re.MULTILINE), result
    assert "crash on start" in result.stderr, result
    assert "'ext'" not in result.stderr, result
    match = re.search(r"^loom: run (r_\w+) completed in 2 steps$", result.stderr, re.MULTILINE)
    assert match, result

    exported = run_loom("export", match.group(1), cwd=project, home=home)
    assert exported.returncode == 0, exported
    by_tool = {e.tool: e for e in exported.events() if isinstance(e, ToolCallFinished)}
    assert set(by_tool) == {"ext__echo", "flaky__echo"}
    assert not by_tool["ext__echo"].is_error
    assert by_tool["ext__echo"].content == "ping-ping-ping-"
    assert by_tool["flaky__echo"].is_error
    assert by_tool["flaky__echo"].failure == "server_unavailable"


def test_a_server_dying_mid_call_is_reported_as_an_unknown_outcome(tmp_path: Path) -> None:
    # The tool's effect happens, then its server dies before answering. Saying "unavailable, try another way" would
    # invite a repeat of an effect that already happened: the model and the user are told the outcome is unknown.
    project = make_project(tmp_path / "project")
    home = tmp_path / "home"
    count = tmp_path / "count.txt"
    write_config(project / "servers.json", {"ext": stdio_test_server(TEST_SERVER_COUNT_FILE=str(count))})
    write_script(
        project / "die.json",
        [
            {"tool_calls": [{"id": "t", "name": "ext__touch_then_die", "arguments": {"tag": "paid"}}]},
            {"text": "the server said: {{result:t}}"},
        ],
    )
    result = run_loom(
        "run", "--mode", "bypass", "--config", "servers.json", "--model", "scripted:die.json", "go",
        cwd=project, home=home,
    )  # fmt: skip
    assert result.returncode == 0, result
    assert count.read_text().splitlines() == ["paid"]  # the effect did happen, once
    assert re.search(r"^  ✗ ext__touch_then_die .*stopped during the call", result.stdout, re.MULTILINE), result
    assert "the outcome is unknown: ext__touch_then_die may already have taken effect" in result.stdout, result
    assert "try another way" not in result.stdout, result
    match = re.search(r"^loom: run (r_\w+) completed", result.stderr, re.MULTILINE)
    assert match, result
    exported = run_loom("export", match.group(1), cwd=project, home=home)
    finished = [e for e in exported.events() if isinstance(e, ToolCallFinished)]
    assert [(e.tool, e.is_error, e.failure) for e in finished] == [("ext__touch_then_die", True, "outcome_unknown")]
