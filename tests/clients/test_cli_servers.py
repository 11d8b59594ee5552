"""``loom servers`` and ``loom models`` as a user runs them: real CLI subprocesses and servers, daemon or not."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from clients.cli.render import TerminalRenderer
from clients.timeline import build_timeline, render_timeline
from orchestrator.events import Event, RunFinished, RunStarted, ServerFailed, ServerLog, ServerStateChanged
from orchestrator.protocol_servers import ModelList, ServerList
from tests.clients.cli_support import run_loom, stdio_test_server, write_script
from tests.mcp_calls import call
from tests.orchestrator.daemon.daemon_process import mcp_client, running_daemon

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(300)]

SLOW_S = 120.0
"""Each probe starts real servers (a Python process each): seconds alone, far more on a loaded machine."""

HOSTILE_STDERR = "import sys; sys.stderr.write('\\x1b]0;pwned\\x07\\x1b[2Jbad token in config\\n'); sys.exit(3)"
"""A server that dies at once, its stderr an escape sequence that would retitle the window and clear the screen."""


def setup(tmp_path: Path, servers: dict[str, Any], **config: Any) -> tuple[Path, Path]:
    home, cwd = tmp_path / "home", tmp_path / "work"
    home.mkdir(mode=0o700)
    cwd.mkdir()
    (home / "config.json").write_text(json.dumps({"mcpServers": servers, **config}), encoding="utf-8")
    return home, cwd


def rows(stdout: str) -> dict[str, list[str]]:
    """The table's rows by server name: NAME [(built-in)]  STATE [(transport)]  TOOLS  RESTARTS  LATENCY  ERROR."""
    lines = stdout.splitlines()
    assert lines[0].split() == ["NAME", "STATE", "TOOLS", "RESTARTS", "LATENCY", "LAST", "ERROR"]
    found = {}
    for line in lines[1:]:
        cells = line.replace(" (built-in)", "").split(None, 6)
        found[cells[0]] = cells[1:]
    return found


def test_without_a_daemon_the_servers_are_probed_and_a_failed_one_exits_1_with_its_reason_made_safe(
    tmp_path: Path,
) -> None:
    home, cwd = setup(
        tmp_path,
        {
            "ext": stdio_test_server(),
            "hostile": {"command": sys.executable, "args": ["-c", HOSTILE_STDERR]},
            "ghost": {"command": "loom-test-no-such-command"},
        },
    )
    done = run_loom("servers", cwd=cwd, home=home, timeout_s=SLOW_S)
    assert done.returncode == 1, done
    table = rows(done.stdout)
    assert table["ext"][:5] == ["ready", "(stdio)", "5", "0", table["ext"][4]] and table["ext"][4].endswith("ms")
    assert table["fs"][0] == "ready" and int(table["fs"][1]) >= 6
    assert table["hostile"][:2] == ["failed", "(stdio)"]
    assert table["ghost"][:2] == ["failed", "(stdio)"]
    assert "no such command" in done.stdout
    assert "started afresh" in done.stderr and "2 servers failed: hostile, ghost" in done.stderr
    assert "bad token in config" in done.stderr  # the whole error under the table, stderr tail and all
    for text in (done.stdout, done.stderr):
        assert "\x1b" not in text and "\x07" not in text

    as_json = run_loom("servers", "--json", cwd=cwd, home=home, timeout_s=SLOW_S)
    listing = ServerList.model_validate_json(as_json.stdout)
    assert as_json.returncode == 1 and listing.source == "probe"
    hostile = next(s for s in listing.servers if s.name == "hostile")
    assert "bad token in config" in hostile.stderr_tail


async def test_on_a_daemon_an_open_sessions_servers_show_their_live_state(tmp_path: Path) -> None:
    home, cwd = setup(tmp_path, {"ext": stdio_test_server()})
    model = write_script(tmp_path / "script.json", [{"text": "hi"}])
    with running_daemon(home, tmp_path) as daemon:
        async with mcp_client(daemon, "auto") as client:
            sid = (await call(client, "create_session", cwd=str(cwd), model=f"scripted:{model}"))["session_id"]
            live = run_loom("servers", "--session", sid, cwd=cwd, home=home, timeout_s=SLOW_S)
            not_open = run_loom("servers", "--session", "s_nope", cwd=cwd, home=home, timeout_s=SLOW_S)
    assert live.returncode == 0, live
    assert f"live state of session {sid}'s servers" in live.stderr
    table = rows(live.stdout)
    assert table["ext"][:4] == ["ready", "(stdio)", "5", "0"]
    assert {"fs", "shell", "memory", "loom"} <= set(table)
    assert not_open.returncode == 0, not_open
    assert "session s_nope is not open here" in not_open.stderr and rows(not_open.stdout)["ext"][0] == "ready"


def test_loom_models_lists_the_default_and_configured_models_with_their_windows(tmp_path: Path) -> None:
    home, cwd = setup(
        tmp_path,
        {},
        model="openai:my-local",
        models={
            "openai:my-local": {"contextWindow": 32000, "compactAt": 0.7},
            "openai:qwen*": {"contextWindow": 64000},
        },
    )
    done = run_loom("models", cwd=cwd, home=home, timeout_s=SLOW_S)
    assert done.returncode == 0, done
    lines = done.stdout.splitlines()
    assert lines[0].split()[:2] == ["MODEL", "WINDOW"]
    default = next(line for line in lines if line.startswith("* "))
    assert default.split()[1:4] == ["openai:my-local", "32,000", "70%"]
    assert "openai:qwen*: 64,000 tokens (config)" in done.stdout
    assert "anthropic:claude-*: 200,000 tokens (built-in)" in done.stdout
    found = ModelList.model_validate_json(run_loom("models", "--json", cwd=cwd, home=home, timeout_s=SLOW_S).stdout)
    assert found.default == "openai:my-local" and found.profiles[0].default
    assert "OPENAI_API_KEY" in found.profiles[0].problem  # the CLI's environment has no key: it says so


SID = "s_00000001"


def server_events(t0: float) -> list[Event]:
    """A run during which a server fails, comes back and logs a warning, as the supervisor records them."""
    return [
        RunStarted(session_id=SID, ts=t0, run_id="r_1", text="go", model="scripted:x", max_steps=5),
        ServerStateChanged(session_id=SID, ts=t0 + 1, server="ext", state="failed", reason="stopped answering"),
        ServerFailed(session_id=SID, ts=t0 + 1, server="ext", error="stopped answering"),
        ServerStateChanged(session_id=SID, ts=t0 + 2, server="ext", state="ready", restarts=1, tools=5),
        ServerLog(session_id=SID, ts=t0 + 3, server="ext", level="error", message="\x1b]0;x\x07quota hit"),
        RunFinished(session_id=SID, ts=t0 + 4, run_id="r_1", status="completed", reason="", final_text="", steps=1),
    ]


def test_loom_attach_and_run_say_a_failure_once_then_the_recovery_and_the_servers_warnings() -> None:
    out, err = io.StringIO(), io.StringIO()
    renderer = TerminalRenderer(out, err)
    for event in server_events(1000.0):
        renderer(event)
    lines = [line for line in err.getvalue().splitlines() if "ext" in line]
    assert lines == [
        "loom: warning: MCP server 'ext' is unavailable: stopped answering",
        "loom: server ext is back (restart 1, 5 tools)",
        "loom: error: server ext: ]0;xquota hit",  # the escapes dropped, inert text left
    ]


def test_loom_trace_puts_the_servers_state_changes_and_logs_in_the_runs_timeline() -> None:
    entries = build_timeline(server_events(1000.0), "r_1")
    server = [(e.at_s, e.kind, e.name, e.status) for e in entries if e.name == "ext"]
    assert server == [
        (1.0, "error", "ext", "server_failed"),
        (2.0, "notice", "ext", "server_ready"),
        (3.0, "error", "ext", "log error"),
    ]
    assert "\x1b" not in render_timeline({"run_id": "r_1", "session_id": SID, "status": "completed"}, entries)
