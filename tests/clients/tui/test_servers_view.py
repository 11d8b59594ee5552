"""``/servers`` against a real daemon: the configured servers probed before a session exists, then the session's own.

The daemon runs a real stdio test server and one that dies at once writing an escape sequence to stderr; the TUI is
driven with Pilot.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from textual.widgets import DataTable, Static

from clients.tui.notice_line import NoticeLine
from clients.tui.servers_view import ServersScreen
from orchestrator.events import Event, ServerFailed, ServerLog, ServerState, ServerStateChanged
from tests.clients.cli_support import stdio_test_server, write_script
from tests.clients.tui.scenes import SESSION, TS, ConversationApp, settle
from tests.clients.tui.support import connected, tui, type_message, until
from tests.orchestrator.daemon.daemon_process import running_daemon

pytestmark = pytest.mark.timeout(120)

HOSTILE = "import sys; sys.stderr.write('\\x1b]0;pwned\\x07\\x1b[2Jbad token in config\\n'); sys.exit(3)"


def cells(screen: ServersScreen, name: str) -> list[str]:
    table = screen.query_one("#servers-table", DataTable)
    return [str(cell) for cell in table.get_row(name)]


async def drive(home: Path, project: Path, model: str) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    app = tui(home, project, model)
    async with app.run_test(size=(120, 30)) as pilot:
        await connected(pilot)
        await type_message(pilot, "/servers")
        await until(pilot, lambda: isinstance(app.screen, ServersScreen), "the servers screen")
        screen = app.screen
        assert isinstance(screen, ServersScreen)
        await until(pilot, lambda: screen.listing is not None, "the probe's answer", timeout_s=60)
        assert screen.listing is not None
        seen["probe_source"] = screen.listing.source
        seen["probe_ext"] = cells(screen, "ext")
        seen["probe_hostile"] = cells(screen, "hostile")
        seen["heading"] = str(screen.query_one("#servers-heading", Static).render())
        table = screen.query_one("#servers-table", DataTable)
        table.move_cursor(row=list(table.rows).index(next(k for k in table.rows if k.value == "hostile")))
        await pilot.pause()
        seen["detail"] = str(screen.query_one("#servers-detail", Static).render())
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, ServersScreen), "the screen to close")

        await type_message(pilot, "hello")
        await until(pilot, lambda: app.session_id is not None, "a session")
        await type_message(pilot, "/servers")
        await until(pilot, lambda: isinstance(app.screen, ServersScreen), "the servers screen again")
        live = app.screen
        assert isinstance(live, ServersScreen)
        await until(pilot, lambda: live.listing is not None, "the session's listing")
        assert live.listing is not None
        seen["live_source"] = (live.listing.source, live.listing.session_id == app.session_id)
        seen["live_ext"] = cells(live, "ext")
        seen["live_names"] = {s.name for s in live.listing.servers}
        await pilot.press("escape")
    return seen


def test_servers_shows_the_probe_then_the_sessions_live_servers_with_errors_made_safe(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir(mode=0o700)
    project.mkdir()
    servers = {"ext": stdio_test_server(), "hostile": {"command": sys.executable, "args": ["-c", HOSTILE]}}
    (home / "config.json").write_text(json.dumps({"mcpServers": servers}))
    model = f"scripted:{write_script(tmp_path / 's.json', [{'text': 'hi there'}])}"
    with running_daemon(home, tmp_path):
        seen = anyio.run(drive, home, project, model)
    assert seen["probe_source"] == "probe"
    assert seen["probe_ext"][:5] == ["ext", "ready (stdio)", "5", "0", seen["probe_ext"][4]]
    assert seen["probe_hostile"][1] == "failed (stdio)"
    assert "1 failed" in str(seen["heading"]) and "probed afresh" in str(seen["heading"])
    detail = str(seen["detail"])
    assert detail.startswith("hostile: ") and "bad token in config" in detail
    assert "\x1b" not in detail and "\x07" not in detail
    assert seen["live_source"] == ("session", True)
    assert seen["live_ext"][1:3] == ["ready (stdio)", "5"]
    names = seen["live_names"]
    assert isinstance(names, set) and {"fs", "shell", "memory", "loom", "ext", "hostile"} <= names


def state(name: str, state: ServerState, reason: str = "", restarts: int = 0, tools: int | None = None) -> Event:
    return ServerStateChanged(
        session_id=SESSION, ts=TS, server=name, state=state, reason=reason, restarts=restarts, tools=tools
    )


@pytest.mark.anyio
async def test_the_conversation_tells_a_failure_once_a_recovery_and_warnings_but_not_every_start() -> None:
    events = [
        state("ext", "starting"),
        state("ext", "ready", tools=5),  # a first start: every session's servers do it; not worth a line
        state("ext", "failed", "stopped answering", restarts=0),  # told by the server_failed that follows it
        ServerFailed(session_id=SESSION, ts=TS, server="ext", error="stopped answering"),
        state("ext", "ready", restarts=1, tools=5),
        state("ext", "degraded", "health check took 12s"),
        ServerLog(session_id=SESSION, ts=TS, server="ext", level="warning", logger="db", message="\x1b[2Jdisk low"),
    ]
    app = ConversationApp(events)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        shown = [(n.text, next(c[1:] for c in n.classes)) for n in app.conversation.query(NoticeLine)]
    assert shown == [
        ("server ext failed: stopped answering", "error"),
        ("server ext is back (restart 1, 5 tools)", "info"),
        ("server ext is degraded (it answers slowly or with errors): health check took 12s", "warning"),
        ("server ext [db]: [2Jdisk low", "warning"),  # the escape itself is dropped: inert text is left
    ]
