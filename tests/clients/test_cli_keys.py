"""``loom run`` with a real provider but no key: refused before a run is recorded (exit 2), naming the variable.

Also the registration examples (``mcp.json.example``, ``docs/clients.md``): the agents that start ``loom mcp``
pass it no environment of their own (Codex) or need the installed command's path, so the examples say how.
"""

from __future__ import annotations

import json
import re
import time
import tomllib
from pathlib import Path

import pytest

from orchestrator.events import RunFinished
from tests.clients.cli_support import REPO_ROOT, assert_nothing_recorded, make_project, run_loom
from tests.orchestrator.models.fake_common import text_reply
from tests.orchestrator.models.fake_openai import FakeOpenAI


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "project")


def test_anthropic_without_a_key_is_refused_before_the_run(project: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"

    result = run_loom("run", "--model", "anthropic:claude-test", "hello", cwd=project, home=home)

    assert result.returncode == 2, result
    assert re.search(r"^loom: error: .*set ANTHROPIC_API_KEY", result.stderr, re.MULTILINE), result
    assert "--model" in result.stderr and "pass api_key" not in result.stderr, result
    assert "Traceback" not in result.stderr
    assert_nothing_recorded(home, result.stdout)


def test_openai_without_a_key_or_base_url_is_refused_at_once(project: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    started = time.monotonic()

    result = run_loom("run", "--model", "openai:gpt-4o", "hello", cwd=project, home=home)

    assert result.returncode == 2, result
    assert "OPENAI_API_KEY" in result.stderr and "OPENAI_BASE_URL" in result.stderr, result
    assert "api.openai.com" in result.stderr and "retrying" not in result.stderr, result
    assert time.monotonic() - started < 15  # no DNS lookups, no backoff between retries
    assert_nothing_recorded(home, result.stdout)


def test_openai_at_a_remote_base_url_without_a_key_is_refused(project: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"

    result = run_loom(
        "run", "--model", "openai:deepseek-chat", "hello", cwd=project, home=home,
        env={"OPENAI_BASE_URL": "https://api.deepseek.com/v1"},
    )  # fmt: skip

    assert result.returncode == 2, result
    assert "OPENAI_API_KEY" in result.stderr and "api.deepseek.com" in result.stderr, result
    assert_nothing_recorded(home, result.stdout)


def test_openai_at_a_local_server_needs_no_key(project: Path, tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.script(text_reply("hello from the local model"))

    result = run_loom(
        "run", "--json", "--model", "openai:llama3", "hello", cwd=project, home=tmp_path / "home",
        env={"OPENAI_BASE_URL": fake_openai.base_url},
    )  # fmt: skip

    assert result.returncode == 0, result
    finished = result.events()[-1]
    assert isinstance(finished, RunFinished) and finished.final_text == "hello from the local model"
    assert "authorization" not in fake_openai.requests[0].headers


def test_the_demo_needs_no_key(project: Path, tmp_path: Path) -> None:
    result = run_loom("run", "--model", "scripted:demo", "explore", cwd=project, home=tmp_path / "home")

    assert result.returncode == 0, result


def test_mcp_json_example_points_at_the_installed_command_and_passes_the_environment() -> None:
    example = json.loads((REPO_ROOT / "mcp.json.example").read_text(encoding="utf-8"))
    servers = example["mcpServers"]

    for name, server in servers.items():
        assert server["command"].endswith("/.venv/bin/loom") and server["command"].startswith("/"), name
    env = servers["loom"]["env"]
    assert {"LOOM_HOME", "ANTHROPIC_API_KEY"} <= set(env), env


def test_the_codex_snippet_passes_an_env_table() -> None:
    doc = (REPO_ROOT / "docs" / "clients.md").read_text(encoding="utf-8")
    section = doc[doc.index("## Codex") :]
    snippet = section[section.index("```toml") + len("```toml") : section.index("```", section.index("```toml") + 7)]
    loom = tomllib.loads(snippet)["mcp_servers"]["loom"]

    assert loom["command"].endswith("/.venv/bin/loom") and loom["command"].startswith("/"), loom
    assert {"LOOM_HOME", "ANTHROPIC_API_KEY"} <= set(loom["env"]), loom
