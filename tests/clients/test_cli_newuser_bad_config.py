"""Issue 12, what a new user hit: with a bad config, ``loom mcp`` exited and the client saw "Connection closed".

Now it answers the handshake, lists the face's tools, and every tool call returns the config error and
what to do; it introduces itself as the working face does. It exits 2 once the client disconnects.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.clients.cli_support import run_loom
from tests.clients.test_cli_mcp import loom_mcp
from tests.clients.test_cli_newuser_model import TEST_TIMEOUT_S, text_of

pytestmark = pytest.mark.anyio

MODES = ["auto", "legacy"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_bad_config_is_answered_in_every_tool_call(tmp_path: Path, mode: str) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.json").write_text('{"model": 5}', encoding="utf-8")
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with loom_mcp(home, tmp_path, mode=mode, name=f"bad-{mode}") as face:
            tools = {t.name for t in (await face.client.list_tools()).tools}
            created = await face.client.call_tool("create_session", {"cwd": str(tmp_path)})
            listed = await face.client.call_tool("list_sessions", {})
            info, capabilities = face.client.server_info, face.client.server_capabilities
        async with loom_mcp(tmp_path / "good", tmp_path, mode=mode, name=f"good-{mode}") as good:
            expected = good.client.server_info, good.client.server_capabilities
    assert {"create_session", "send_message", "list_sessions"} <= tools
    for result in (created, listed):
        text = text_of(result)
        assert result.is_error, text
        assert str(home / "config.json") in text and "'model' must be a string" in text, text
        assert "Fix it, then restart" in text, text
    assert (info, capabilities) == expected


def test_loom_mcp_with_a_bad_config_exits_2_when_the_client_goes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.json").write_text("{not json", encoding="utf-8")
    result = run_loom("mcp", cwd=tmp_path, home=home, timeout_s=TEST_TIMEOUT_S)  # stdin at EOF: the client is gone
    assert result.returncode == 2, result
    assert "config.json" in result.stderr and "Traceback" not in result.stderr
    assert result.stdout == ""
