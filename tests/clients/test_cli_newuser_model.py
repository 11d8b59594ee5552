"""Issue 12, what a new user hit: a session created through the face uses the configured model.

``loom run`` takes ``--model``, then ``LOOM_MODEL``, then the config's ``model``, then the default; the
face's ``create_session`` (embedded ``loom mcp``, and the daemon) follows the same rule instead of
falling back to the scripted demo. Real ``loom`` subprocesses throughout.

:func:`loom_mcp` here is the stdio driver the other ``test_cli_newuser_*`` files use too.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp import types as mt
from mcp.client.stdio import stdio_client

from orchestrator.events import SessionCreated
from tests.clients.cli_support import loom_command, run_loom, write_script
from tests.orchestrator.daemon.daemon_process import mcp_client, running_daemon

pytestmark = pytest.mark.anyio

TEST_TIMEOUT_S = 40.0


@dataclass
class Face:
    """A driving client of one ``loom mcp`` process."""

    client: Client
    stderr_path: Path

    async def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        """Call a tool that must succeed; its structured result."""
        result = await self.client.call_tool(tool, arguments)
        assert not result.is_error, f"{tool}: {text_of(result)}\n{self.stderr()}"
        content: dict[str, Any] | None = result.structured_content
        assert content is not None
        return content

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")


@contextlib.asynccontextmanager
async def loom_mcp(
    home: Path,
    cwd: Path,
    *,
    mode: str = "auto",
    name: str = "mcp",
    env: Mapping[str, str] | None = None,
    client_name: str | None = None,
) -> AsyncIterator[Face]:
    """Start ``loom mcp`` (``LOOM_HOME=home``, plus ``env``) and connect to it over stdio as ``client_name``."""
    command = loom_command()
    params = StdioServerParameters(
        command=command[0],
        args=[*command[1:], "mcp"],
        # PYTHONPATH passes through, so that a checkout other than the installed one can be tested.
        env={"LOOM_HOME": str(home), "PATH": os.environ["PATH"], **_pythonpath(), **(env or {})},
        cwd=str(cwd),
    )
    info = mt.Implementation(name=client_name, version="9.9") if client_name else None
    stderr_path = cwd / f"{name}.stderr"
    with stderr_path.open("w", encoding="utf-8") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode=mode, client_info=info) as client:
            yield Face(client, stderr_path)


def _pythonpath() -> dict[str, str]:
    return {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}


def text_of(result: mt.CallToolResult) -> str:
    return " ".join(c.text for c in result.content if isinstance(c, mt.TextContent))


def scripted(path: Path, turns: Sequence[dict[str, Any]]) -> str:
    return f"scripted:{write_script(path, turns)}"


def configure(home: Path, **fields: Any) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.json").write_text(json.dumps(fields), encoding="utf-8")


async def test_create_session_through_loom_mcp_uses_the_configs_model(tmp_path: Path) -> None:
    home = tmp_path / "home"
    configured = scripted(tmp_path / "configured.json", [{"text": "from the config's model"}])
    configure(home, model=configured)
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with loom_mcp(home, tmp_path) as face:
            session = await face.call("create_session", cwd=str(tmp_path))
            run = await face.call("send_message", session_id=session["session_id"], text="hi", wait_s=20)
    assert session["model"] == configured
    assert (run["status"], run["final_text"]) == ("completed", "from the config's model")


async def test_loom_model_beats_the_config_and_an_argument_beats_both(tmp_path: Path) -> None:
    home = tmp_path / "home"
    configure(home, model=scripted(tmp_path / "configured.json", [{"text": "config"}]))
    from_env = scripted(tmp_path / "env.json", [{"text": "LOOM_MODEL"}])
    asked = scripted(tmp_path / "asked.json", [{"text": "argument"}])
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with loom_mcp(home, tmp_path, env={"LOOM_MODEL": from_env}) as face:
            by_env = await face.call("create_session", cwd=str(tmp_path))
            by_argument = await face.call("create_session", cwd=str(tmp_path), model=asked)
    assert (by_env["model"], by_argument["model"]) == (from_env, asked)


async def test_loom_run_and_the_face_choose_the_same_model(tmp_path: Path) -> None:
    home = tmp_path / "home"
    configured = scripted(tmp_path / "configured.json", [{"text": "the same model"}])
    configure(home, model=configured)
    ran = await anyio.to_thread.run_sync(lambda: run_loom("run", "hi", "--json", cwd=tmp_path, home=home))
    assert ran.returncode == 0, ran
    [created] = [e for e in ran.events() if isinstance(e, SessionCreated)]
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with loom_mcp(home, tmp_path) as face:
            session = await face.call("create_session", cwd=str(tmp_path))
    assert created.model == session["model"] == configured


async def test_create_session_on_the_daemon_uses_the_configs_model(tmp_path: Path) -> None:
    home = tmp_path / "home"
    configured = scripted(tmp_path / "configured.json", [{"text": "the daemon's configured model"}])
    configure(home, model=configured)
    with running_daemon(home, tmp_path) as daemon, anyio.fail_after(TEST_TIMEOUT_S):
        async with mcp_client(daemon, "auto") as client:
            made = await client.call_tool("create_session", {"cwd": str(tmp_path)})
            assert made.structured_content is not None, text_of(made)
            session_id = made.structured_content["session_id"]
            sent = await client.call_tool("send_message", {"session_id": session_id, "text": "hi", "wait_s": 20})
    assert made.structured_content["model"] == configured
    assert sent.structured_content is not None
    assert sent.structured_content["final_text"] == "the daemon's configured model"
