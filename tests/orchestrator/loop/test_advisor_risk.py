"""What a lightweight advisor counts as risky, against a hostile model that disguises a destructive command.

The tools are the real ones of Loom's servers (and an external one), taken from a real Hub.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

from orchestrator.hub.pool import Hub
from orchestrator.loop.advisor import MAX_REASON_CHARS, MAX_REASONS, parse_answer
from orchestrator.loop.advisor_risk import risks

pytestmark = pytest.mark.anyio


def external_server() -> MCPServer:
    server = MCPServer("ext", log_level="WARNING")

    @server.tool()
    def bare(x: str) -> str:
        """No annotations at all."""
        return x

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def look(x: str) -> str:
        """Read-only."""
        return x

    @server.tool(annotations=ToolAnnotations(destructive_hint=True))
    def drop(x: str) -> str:
        """Says it destroys."""
        return x

    return server


@contextlib.asynccontextmanager
async def hub_in(tmp_path: Path) -> AsyncIterator[Hub]:
    from servers import fs, shell

    servers = {
        "fs": fs.build_server([tmp_path]),
        "shell": shell.build_server(tmp_path, sandbox="off"),
        "ext": external_server(),
    }
    async with Hub(servers) as hub:
        yield hub


@pytest.mark.parametrize(
    "command",
    [
        "rm -rf ~",
        "'r'm -rf build",
        "\\rm -rf build",
        "/bin/rm -rf build",
        "command rm -rf build",
        "nice -n 5 timeout 10 rm -rf build",
        "busybox rm -rf build",
        "$(echo rm) -rf build",
        "`printf rm` -rf build",
        "ls; rm -rf build",
        "ls && RM=1 rm -rf build",
        "bash -c 'rm -rf build'",
        "xargs rm < list.txt",
        "git -C . clean -fdx",
        "git push origin +main",
        "git push --force-with-lease",
        "dd if=/dev/zero of=disk.img",
        "chmod -R 777 .",
        "sudo -u root ls",
        "find . -exec rm {} +",
        "sed -i s/a/b/ file.txt",
        "echo data | tee /etc/motd",
    ],
)
async def test_a_disguised_destructive_command_is_still_risky(tmp_path: Path, command: str) -> None:
    async with hub_in(tmp_path) as hub:
        assert risks(hub.tool("shell__run"), {"command": command}, str(tmp_path)), command


@pytest.mark.parametrize(
    "command", ["ls -la", "git status", "git log --oneline -5", "cat README.md", "grep -rn TODO src", "ls | wc -l"]
)
async def test_a_plain_harmless_command_is_not(tmp_path: Path, command: str) -> None:
    async with hub_in(tmp_path) as hub:
        assert risks(hub.tool("shell__run"), {"command": command}, str(tmp_path)) == []


async def test_paths_outside_the_working_directory_and_unannotated_external_tools(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "link").symlink_to(tmp_path.parent)
    async with hub_in(tmp_path) as hub:
        write = hub.tool("fs__write")
        assert risks(write, {"path": "inside.txt", "content": ""}, str(work)) == []
        for path in ("../x.txt", str(tmp_path / "x.txt"), "~/.bashrc", "sub/../../x.txt"):
            assert any("outside the working directory" in r for r in risks(write, {"path": path}, str(work))), path
        # A read-only tool may read outside (policy and the fs server's roots decide that); a write may not.
        assert risks(hub.tool("fs__read"), {"path": "../x.txt"}, str(work)) == []
        assert risks(hub.tool("ext__bare"), {"x": "1"}, str(work)) == [
            "ext__bare is a tool of the external server 'ext' and has no MCP annotations"
        ]
        assert risks(hub.tool("ext__look"), {"x": "1"}, str(work)) == []
        assert risks(hub.tool("ext__drop"), {"x": "1"}, str(work)) == [
            "ext__drop is marked destructive by its server 'ext'"
        ]
        assert risks(None, {"command": "rm -rf /"}, str(work)) == []  # an unknown tool is refused before anything runs


def test_a_flooding_advisor_is_cut_to_size() -> None:
    answer = json.dumps({"verdict": "warn", "reasons": ["x" * 100_000] * 1000})
    verdict, reasons = parse_answer(answer)
    assert verdict == "warn" and len(reasons) == MAX_REASONS and all(len(r) <= MAX_REASON_CHARS for r in reasons)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('```json\n{"verdict": "approve", "reasons": []}\n```', ("approve", [])),
        ('{"verdict": "reject", "reasons": ["  ", "real"]}', ("reject", ["real"])),
        ('{"verdict": "APPROVE"}', ("error", ["the advisor's verdict 'APPROVE' is not approve, warn or reject"])),
        ("", ("error", ["the advisor's answer is not JSON: ''"])),
    ],
)
def test_answers_are_read_strictly(text: str, expected: tuple[str, list[str]]) -> None:
    assert parse_answer(text) == expected
