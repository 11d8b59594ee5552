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


async def test_loom_server_memory_keeps_project_notes_apart_over_stdio(tmp_path: Path) -> None:
    db = str(tmp_path / "memory.db")

    def params(project: str) -> StdioServerParameters:
        return StdioServerParameters(command=LOOM, args=["server", "memory", "--db", db, "--project", project])

    async with Client(params("/work/a")) as client:
        await client.call_tool("set", {"namespace": "project", "key": "build", "body": "make all\nthen test"})
        await client.call_tool("set", {"namespace": "user", "key": "style", "body": "short answers"})
        mine = await client.call_tool("list", {"namespace": "project"})
    assert mine.structured_content is not None
    assert [(n["key"], n["summary"]) for n in mine.structured_content["notes"]] == [("build", "make all")]
    async with Client(params("/work/b")) as client:
        other = await client.call_tool("list", {"namespace": "project"})
        shared = await client.call_tool("get", {"namespace": "user", "key": "style"})
    assert other.structured_content == {"namespace": "project", "notes": []}
    assert shared.structured_content is not None and shared.structured_content["body"] == "short answers"
