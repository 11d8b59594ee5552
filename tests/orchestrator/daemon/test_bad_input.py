"""Input no file system or encoder accepts, sent to a real ``loom serve``: a clear error, no traceback.

A 5,000-character ``cwd`` used to fail ``create_session`` with a bare "Error executing tool" and a traceback in
the daemon's log; a lone surrogate (a ``\\ud800`` escape in the JSON) went on into the runtime.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.orchestrator.daemon.daemon_process import Daemon, http, mcp_client, running_daemon

pytestmark = pytest.mark.anyio

MODERN = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
}


async def raw_call(daemon: Daemon, tool: str, arguments_json: str) -> dict[str, Any]:
    """A 2026-07-28 tools/call whose arguments are sent as the JSON text given (escapes and all)."""
    params = f'{{"name":"{tool}","arguments":{arguments_json},"_meta":{json.dumps(MODERN)}}}'
    body = f'{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{params}}}'
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-method": "tools/call",
        "mcp-name": tool,
        "mcp-protocol-version": "2026-07-28",
    }
    async with http(daemon.token) as client:
        response = await client.post(daemon.url, content=body, headers=headers)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


@pytest.mark.parametrize(
    ("cwd", "says"),
    [
        ("/tmp/" + "a" * 5000, "cwd is 5,005 characters long; paths are at most 4,096"),
        ("/tmp/" + "b" * 300, "cwd has a component of 300 bytes; file names are at most 255 bytes"),
        ("/tmp/" + ("c" * 200 + "/") * 19, "is not a directory; pass an existing working directory"),
        ("/tmp/with\x00nul", "cwd contains a NUL byte"),
        ("", "cwd is empty"),
    ],
)
async def test_an_unusable_cwd_gets_a_clear_error(tmp_path: Path, cwd: str, says: str) -> None:
    with running_daemon(tmp_path / "home", tmp_path) as daemon:
        async with mcp_client(daemon, "auto") as client:
            result = await client.call_tool("create_session", {"cwd": cwd})
            sessions = await client.call_tool("list_sessions", {})
    assert result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    assert says in text and len(text) < 400, text
    assert sessions.structured_content == {"sessions": []}
    assert "Traceback" not in daemon.stderr(), daemon.stderr()


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("create_session", '{"cwd":"/tmp/\\ud800"}'),
        ("send_message", '{"session_id":"s_x","text":"hello \\udcff there"}'),
        ("decide_approval", '{"approval_id":"a_1","decision":"deny","reason":"\\ud83d alone"}'),
    ],
)
async def test_a_lone_surrogate_in_a_modern_request_gets_a_clear_error(
    tmp_path: Path, tool: str, arguments: str
) -> None:
    with running_daemon(tmp_path / "home", tmp_path) as daemon:
        answer = await raw_call(daemon, tool, arguments)
    result = answer["result"]
    assert result["isError"] is True, answer
    assert "holds a lone surrogate, which is not text" in result["content"][0]["text"], answer
    assert "Traceback" not in daemon.stderr(), daemon.stderr()
