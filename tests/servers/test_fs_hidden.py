"""Hidden paths: files inside the roots that the fs tools never read, search or change (Loom's daemon token)."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from servers.fs import build_server
from tests.servers._support import call_error, call_ok

pytestmark = pytest.mark.anyio

SECRET = "token-that-must-not-leak"


async def test_hidden_files_are_refused_by_name_and_skipped_by_searches(root: Path) -> None:
    state = root / "state"
    state.mkdir()
    (state / "daemon.token").write_text(SECRET)
    (state / "config.json").write_text("{}")
    (root / "link-to-token").symlink_to(state / "daemon.token")
    async with Client(build_server([root], hidden=[state / "daemon.token"])) as client:
        for tool, arguments in [
            ("read", {"path": "state/daemon.token"}),
            ("read", {"path": "link-to-token"}),
            ("read", {"path": str(state / "daemon.token")}),
            ("write", {"path": "state/daemon.token", "content": "x"}),
            ("edit", {"path": "state/daemon.token", "old": "token", "new": "x"}),
            ("delete", {"path": "state/daemon.token"}),
        ]:
            assert "Loom's own state" in await call_error(client, tool, arguments), (tool, arguments)
        grep = await call_ok(client, "grep", {"pattern": "token-that"})
        glob = await call_ok(client, "glob", {"pattern": "**/*token*"})
        assert grep["matches"] == [] and [m for m in glob["matches"] if "daemon" in str(m)] == [], (grep, glob)
        assert await call_ok(client, "read", {"path": "state/config.json"})  # the rest of the home stays readable
    assert (state / "daemon.token").read_text() == SECRET
