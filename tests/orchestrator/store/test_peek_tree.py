"""`loom sessions` without a daemon reads the store directly: children are listed under their parent there too."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from orchestrator.face.server import build_face
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.host import SessionHost
from orchestrator.store import peek
from tests.clients.cli_support import run_loom
from tests.mcp_calls import call

pytestmark = pytest.mark.anyio


async def test_the_store_peek_gives_each_child_its_parent_and_loom_sessions_indents_it(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "w"
    work.mkdir()
    async with embedded_runtime(home) as runtime, SessionHost(runtime) as host:
        async with Client(build_face(host)) as client:
            top = (await call(client, "create_session", cwd=str(work), model="scripted:demo"))["session_id"]
            child = (await call(client, "create_session", cwd="", parent_session_id=top, agent="reviewer"))[
                "session_id"
            ]
    rows = {row.session_id: row for row in peek.recent_sessions(home)}
    listed = run_loom("sessions", cwd=work, home=home)
    assert (rows[child].parent_session_id, rows[child].agent) == (top, "reviewer")
    assert rows[top].parent_session_id == ""
    lines = listed.stdout.splitlines()
    (top_line,) = [i for i, line in enumerate(lines) if line.startswith(top)]
    assert lines[top_line + 1].startswith(f"└ {child}") and "[reviewer]" in lines[top_line + 1]
