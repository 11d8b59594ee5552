"""Issue 12, what a new user hit: who Loom says it is, and who it says decided.

Every path to the face (embedded ``loom mcp``, ``loom mcp`` attached to the daemon, the daemon over
HTTP) introduces itself alike: name ``loom``, the package version (it was empty), the same capabilities
(the attached ``loom mcp`` declared fewer) and instructions. An approval decided through an attached
``loom mcp`` is recorded as decided by the client driving it, not by ``mcp:loom-mcp``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from servers._version import loom_version
from tests.clients.cli_support import run_loom
from tests.clients.test_cli_mcp import loom_mcp, scripted
from tests.clients.test_cli_newuser_model import TEST_TIMEOUT_S
from tests.orchestrator.daemon.daemon_process import mcp_client, running_daemon

pytestmark = pytest.mark.anyio

MODES = ["auto", "legacy"]


def identity(client: Client) -> tuple[Any, ...]:
    info, capabilities = client.server_info, client.server_capabilities
    assert info is not None and capabilities is not None
    return info.name, info.version, capabilities.model_dump(), client.instructions


@pytest.mark.parametrize("mode", MODES)
async def test_every_path_to_the_face_introduces_itself_alike(tmp_path: Path, mode: str) -> None:
    served, alone = tmp_path / "served", tmp_path / "alone"
    with running_daemon(served, tmp_path) as daemon, anyio.fail_after(TEST_TIMEOUT_S):
        async with (
            mcp_client(daemon, mode) as over_http,
            loom_mcp(served, tmp_path, mode=mode, name="attached") as attached,
            loom_mcp(alone, tmp_path, mode=mode, name="embedded") as embedded,
        ):
            seen = {
                "daemon over HTTP": identity(over_http),
                "attached loom mcp": identity(attached.client),
                "embedded loom mcp": identity(embedded.client),
            }
    assert "embedded" not in attached.stderr()  # it did attach
    assert seen["daemon over HTTP"] == seen["attached loom mcp"] == seen["embedded loom mcp"], seen
    name, version, _, _ = seen["embedded loom mcp"]
    assert (name, version) == ("loom", loom_version()) and version == "0.1.0"


@pytest.mark.parametrize("mode", MODES)
async def test_an_approval_through_attached_loom_mcp_is_recorded_as_the_driving_clients(
    tmp_path: Path, mode: str
) -> None:
    home = tmp_path / "home"
    write = {"name": "fs__write", "arguments": {"path": "c.txt", "content": "C"}}
    model = scripted(tmp_path / "script.json", [{"text": "asking", "tool_calls": [write]}, {"text": "wrote c.txt"}])
    with running_daemon(home, tmp_path), anyio.fail_after(TEST_TIMEOUT_S):
        async with loom_mcp(home, tmp_path, mode=mode, client_name="claude-code-test") as face:
            session = await face.call("create_session", cwd=str(tmp_path), model=model, mode="ask")
            run = await face.call("send_message", session_id=session["session_id"], text="go", wait_s=20)
            decided = await face.call(
                "decide_approval", approval_id=run["pending_approvals"][0], decision="approve_once"
            )
            done = await face.call("get_run", run_id=run["run_id"], wait_s=20)
            page = await face.call("read_events", session_id=session["session_id"])
    assert run["status"] == "awaiting_approval"
    assert decided["decided_by"] == "mcp:claude-code-test"
    assert [e["decided_by"] for e in page["events"] if e["type"] == "approval_decided"] == ["mcp:claude-code-test"]
    assert (done["status"], (tmp_path / "c.txt").read_text()) == ("completed", "C")


def test_loom_version_is_the_packages(tmp_path: Path) -> None:
    result = run_loom("--version", cwd=tmp_path, home=tmp_path / "home")

    assert (result.returncode, result.stdout, result.stderr) == (0, f"loom {loom_version()}\n", "")
