"""Every Loom MCP server declares Loom's package version in ``serverInfo`` (it used to be empty)."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer

from orchestrator.face.server import build_face
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.host import SessionHost
from orchestrator.runtime.session_tools import build_session_tools
from orchestrator.store.checkpoints import CheckpointStore
from servers import checkpoints, fs, memory, shell
from servers._version import loom_version

pytestmark = pytest.mark.anyio


def test_the_version_is_the_packages() -> None:
    assert loom_version() == importlib.metadata.version("loom-agent") != ""


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_every_loom_server_declares_the_package_version(tmp_path: Path, mode: str) -> None:
    async with CheckpointStore(tmp_path / "other.db") as store:
        servers: dict[str, MCPServer] = {
            "fs": fs.build_server([tmp_path]),
            "shell": shell.build_server(tmp_path),
            "memory": memory.build_server(tmp_path / "memory.db"),
            "checkpoints": checkpoints.build_server(tmp_path / "loom.db"),
            "loom": build_session_tools(store, "s_1", home=tmp_path, project=tmp_path),
        }
        declared = {}
        for name, server in servers.items():
            async with Client(server, mode=mode) as client:
                assert client.server_info is not None
                declared[name] = (client.server_info.name, client.server_info.version)
    async with embedded_runtime(tmp_path / "home") as runtime, SessionHost(runtime) as host:
        async with Client(build_face(host), mode=mode) as client:
            assert client.server_info is not None
            declared["face"] = (client.server_info.name, client.server_info.version)
    assert declared == {
        "fs": ("fs", loom_version()),
        "shell": ("shell", loom_version()),
        "memory": ("memory", loom_version()),
        "checkpoints": ("checkpoints", loom_version()),
        "loom": ("loom", loom_version()),
        "face": ("loom", loom_version()),
    }
