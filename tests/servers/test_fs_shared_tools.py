"""Tool schemas built once per process: servers built again reuse them, and never one another's state."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client

import servers._tools
from servers import fs, memory, shell
from servers._tools import bound_tool, template_count
from tests.servers._support import call_error, call_ok
from tests.servers._tool_builds import count_builds

pytestmark = pytest.mark.anyio


async def test_building_servers_again_builds_no_tool_schema(
    tmp_path: Path, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def build_all(n: int) -> None:
        fs.build_server([root])
        shell.build_server(root, sandbox="off")
        memory.build_server(tmp_path / "memory.db", project=str(root), session=f"s{n}")

    build_all(0)  # whatever this process had not built yet is built now
    templates = template_count()
    built = count_builds(monkeypatch)
    for n in range(1, 20):
        build_all(n)
    assert built == []
    assert template_count() == templates


async def test_servers_with_different_roots_in_one_process_see_only_their_own(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    for root in (one, two):
        root.mkdir()
        (root / "mine.txt").write_text(f"I am {root.name}\n")
    async with Client(fs.build_server([one])) as first, Client(fs.build_server([two])) as second:
        # Interleaved, so that a state shared between the two would show in either order.
        for client, own, other in ((first, one, two), (second, two, one), (first, one, two)):
            read = await call_ok(client, "read", {"path": "mine.txt"})
            assert read["text"] == f"I am {own.name}\n"
            refused = await call_error(client, "read", {"path": str(other / "mine.txt")})
            assert "outside" in refused
            listed = await call_ok(client, "list", {"path": "."})
            assert [entry["name"] for entry in listed["entries"]] == ["mine.txt"]
            assert client.instructions is not None
            assert str(own) in client.instructions and str(other) not in client.instructions


async def test_shell_servers_with_different_roots_run_in_their_own(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    async with (
        Client(shell.build_server(one, sandbox="off")) as first,
        Client(shell.build_server(two, sandbox="off")) as second,
    ):
        results: dict[str, str] = {}

        async def pwd(name: str, client: Client) -> None:
            results[name] = (await call_ok(client, "run", {"command": "pwd -P"}))["stdout"].strip()

        async with anyio.create_task_group() as tg:
            tg.start_soon(pwd, "one", first)
            tg.start_soon(pwd, "two", second)
        refused = await call_error(first, "run", {"command": "pwd", "cwd": str(two)})
    assert results == {"one": str(one.resolve()), "two": str(two.resolve())}
    assert "outside the allowed root" in refused


def test_a_closure_cannot_be_a_shared_tool(root: Path) -> None:
    def tool(text: str) -> str:
        return f"{root}: {text}"  # per-server state a shared template would leak to the next server

    with pytest.raises(TypeError, match="closure"):
        bound_tool(tool, name="tool")


async def test_the_shared_template_holds_no_server_state(root: Path) -> None:
    fs.build_server([root])
    for template in servers._tools._TEMPLATES.values():
        with pytest.raises(RuntimeError, match="template"):
            template.fn()
