"""The face's list_servers (an open session's live servers, else the configured ones probed) and list_models."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from orchestrator.config import load_config
from orchestrator.face.server import build_face
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.host import SessionHost
from tests.clients.cli_support import processes_matching
from tests.mcp_calls import call
from tests.orchestrator.face.test_face import script

pytestmark = pytest.mark.anyio

TEST_SERVER = Path(__file__).resolve().parents[1] / "stdio_test_server.py"
BUILT_IN = {"fs", "shell", "memory", "loom", "subagents"}


def write_config(home: Path, config: dict[str, Any]) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.json").write_text(json.dumps(config))


def servers_config(**extra: Any) -> dict[str, Any]:
    """The test server as it is, one that crashes on start, and a command that does not exist."""
    return {
        "mcpServers": {
            "ext": {"command": sys.executable, "args": [str(TEST_SERVER)]},
            "crashy": {
                "command": sys.executable,
                "args": [str(TEST_SERVER)],
                "env": {"TEST_SERVER_CRASH_ON_START": "1"},
            },
            "ghost": {"command": "loom-test-no-such-command", "startupTimeout": 5},
            "off": {"command": "loom-test-no-such-command", "disabled": True},
        },
        **extra,
    }


@asynccontextmanager
async def face_on(tmp_path: Path) -> AsyncIterator[Client]:
    home = tmp_path / "home"
    config = load_config(home, tmp_path)
    async with embedded_runtime(home, config=config) as runtime, SessionHost(runtime) as host:
        async with Client(build_face(host)) as client:
            yield client


def by_name(listing: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in listing["servers"]}


async def test_without_a_session_each_configured_server_is_probed_and_its_failure_said_in_plain_words(
    tmp_path: Path,
) -> None:
    write_config(tmp_path / "home", servers_config())
    async with face_on(tmp_path) as client:
        listing = await call(client, "list_servers")
    assert listing["source"] == "probe" and "probed" in listing["note"]
    servers = by_name(listing)
    assert set(servers) == BUILT_IN | {"ext", "crashy", "ghost", "off"}
    assert (servers["off"]["state"], servers["off"]["tools"]) == ("stopped", 0)  # disabled: never started
    ext = servers["ext"]
    assert (ext["state"], ext["transport"], ext["tools"], ext["built_in"]) == ("ready", "stdio", 5, False)
    assert ext["latency_ms"] is not None and ext["latency_ms"] >= 0
    assert servers["crashy"]["state"] == "failed"
    assert "boom: this server is configured to crash on start" in servers["crashy"]["last_error"]
    assert "boom" in servers["crashy"]["stderr_tail"]
    ghost = servers["ghost"]
    assert ghost["state"] == "failed"
    assert "cannot start 'loom-test-no-such-command': no such command" in ghost["last_error"]
    for name in BUILT_IN:
        assert servers[name]["state"] == "ready" and servers[name]["built_in"], servers[name]
        assert servers[name]["transport"] == "in-process" and servers[name]["tools"] > 0
    assert servers["fs"]["tools"] >= 6  # read, write, edit, list, glob, grep


async def test_an_open_session_shows_its_own_servers_live_and_an_unknown_one_falls_back_to_a_probe(
    tmp_path: Path,
) -> None:
    config = servers_config()
    del config["mcpServers"]["ghost"]
    write_config(tmp_path / "home", config)
    (tmp_path / "w").mkdir()
    model = script(tmp_path, [{"text": "hi"}])
    async with face_on(tmp_path) as client:
        sid = (await call(client, "create_session", cwd=str(tmp_path / "w"), model=model))["session_id"]
        live = await call(client, "list_servers", session_id=sid)
        other = await call(client, "list_servers", session_id="s_not_open")
    assert (live["source"], live["session_id"]) == ("session", sid)
    servers = by_name(live)
    assert servers["ext"]["state"] == "ready" and servers["ext"]["tools"] == 5
    assert servers["crashy"]["state"] == "failed" and "boom" in servers["crashy"]["last_error"]
    assert {"fs", "shell", "memory", "loom"} <= set(servers)
    assert servers["off"]["state"] == "stopped"
    assert other["source"] == "probe" and other["session_id"] == "s_not_open"
    assert "'s_not_open' is not open" in other["note"]
    assert by_name(other)["ext"]["state"] == "ready"


async def test_list_models_gives_each_known_model_its_context_window_and_marks_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LOOM_MODEL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    write_config(
        tmp_path / "home",
        {
            "model": "anthropic:claude-sonnet-4-5",
            "models": {
                "openai:my-local": {"contextWindow": 32000, "compactAt": 0.7},
                "openai:qwen*": {"contextWindow": 64000},
            },
        },
    )
    (tmp_path / "w").mkdir()
    used = script(tmp_path, [{"text": "hi"}])
    async with face_on(tmp_path) as client:
        await call(client, "create_session", cwd=str(tmp_path / "w"), model=used)
        found = await call(client, "list_models")
    assert found["default"] == "anthropic:claude-sonnet-4-5"
    assert found["models"][0] == found["default"]
    profiles = {p["name"]: p for p in found["profiles"]}
    default = profiles["anthropic:claude-sonnet-4-5"]
    assert (default["default"], default["context_window"], default["sources"]) == (True, 200_000, ["default", "config"])
    local = profiles["openai:my-local"]
    assert (local["context_window"], local["compact_threshold"], local["default"]) == (32000, 0.7, False)
    assert "OPENAI_API_KEY" in local["problem"]  # the public endpoint and no key: it could not run from here
    assert profiles[used]["sources"] == ["used"] and profiles[used]["context_window"] == 200_000
    rules = {r["pattern"]: r for r in found["rules"]}
    assert (rules["openai:qwen*"]["context_window"], rules["openai:qwen*"]["source"]) == (64000, "config")
    assert rules["anthropic:claude-*"] == {
        "pattern": "anthropic:claude-*",
        "context_window": 200_000,
        "compact_threshold": None,
        "source": "built-in",
    }
    assert found["providers"] == ["anthropic", "openai", "scripted"]


async def test_a_server_killed_while_idle_is_shown_restarted_with_the_reason_it_failed(tmp_path: Path) -> None:
    own = tmp_path / "own_test_server.py"  # its own path, so that only this test's process is killed
    shutil.copy(TEST_SERVER, own)
    server = {"command": sys.executable, "args": [str(own)], "healthInterval": 0.3, "healthTimeout": 2}
    write_config(tmp_path / "home", {"mcpServers": {"ext": server}})
    (tmp_path / "w").mkdir()
    model = script(tmp_path, [{"text": "hi"}])
    async with face_on(tmp_path) as client:
        sid = (await call(client, "create_session", cwd=str(tmp_path / "w"), model=model))["session_id"]
        before = by_name(await call(client, "list_servers", session_id=sid))["ext"]
        (pid,) = processes_matching(str(own))
        os.kill(pid, signal.SIGKILL)
        with anyio.fail_after(30):
            while True:
                ext = by_name(await call(client, "list_servers", session_id=sid))["ext"]
                if ext["state"] == "ready" and ext["restarts"] >= 1:
                    break
                await anyio.sleep(0.1)
        now = processes_matching(str(own))
    assert (before["state"], before["restarts"], before["last_error"]) == ("ready", 0, "")
    assert ext["tools"] == 5 and ext["last_error"]  # the failure it recovered from is still said
    assert now and pid not in now  # a new process serves it
