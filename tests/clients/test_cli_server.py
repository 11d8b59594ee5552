"""``loom server NAME`` is an ordinary stdio MCP server any client can use."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

pytestmark = pytest.mark.anyio

LOOM = str(Path(sys.executable).with_name("loom"))


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_loom_server_fs_serves_over_stdio(tmp_path: Path, mode: str) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    params = StdioServerParameters(command=LOOM, args=["server", "fs", "--root", str(tmp_path)])
    async with Client(params, mode=mode) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        result = await client.call_tool("read", {"path": "a.txt"})
    assert names == {"read", "write", "edit", "delete", "list", "glob", "grep"}
    assert not result.is_error and result.structured_content is not None
    assert result.structured_content["text"] == "alpha\n"


async def test_loom_server_shell_serves_over_stdio(tmp_path: Path) -> None:
    params = StdioServerParameters(command=LOOM, args=["server", "shell", "--root", str(tmp_path)])
    async with Client(params) as client:
        result = await client.call_tool("run", {"command": "pwd; exit 3"})
    assert result.structured_content is not None
    assert result.structured_content["exit_code"] == 3
    assert result.structured_content["stdout"].strip() == str(await anyio.Path(tmp_path).resolve())
