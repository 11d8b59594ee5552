"""Issue 12, what a new user hit: a session created through the face uses the configured model.

``loom run`` takes ``--model``, then ``LOOM_MODEL``, then the config's ``model``, then the default; the
face's ``create_session`` (embedded ``loom mcp``, and the daemon) follows the same rule instead of
falling back to the scripted demo. Real ``loom`` subprocesses throughout.

:func:`loom_mcp` (from ``test_cli_mcp``) is the stdio driver the other ``test_cli_newuser_*`` files use too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import types as mt

from orchestrator.events import SessionCreated
from tests.clients.cli_support import run_loom
from tests.clients.test_cli_mcp import loom_mcp, scripted
from tests.orchestrator.daemon.daemon_process import mcp_client, running_daemon

pytestmark = pytest.mark.anyio

TEST_TIMEOUT_S = 40.0


def text_of(result: mt.CallToolResult) -> str:
    return " ".join(c.text for c in result.content if isinstance(c, mt.TextContent))


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
