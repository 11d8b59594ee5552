"""One rule for a new session's model: the caller's choice, else ``LOOM_MODEL``, else the config's, else the default.

``loom run`` and the face's ``create_session`` both go through :func:`orchestrator.models.choose_model_spec`;
the face gets the config's model from the runtime, which the embedded runtime builds from the config.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from orchestrator.config import LoomConfig
from orchestrator.face.server import build_face
from orchestrator.models import choose_model_spec, default_model_spec
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.host import SessionHost

pytestmark = pytest.mark.anyio


def script(path: Path, text: str) -> str:
    path.write_text(json.dumps({"turns": [{"text": text}]}), encoding="utf-8")
    return f"scripted:{path}"


def test_the_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOOM_MODEL", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert choose_model_spec(None, None) == default_model_spec() == "scripted:demo"
    assert choose_model_spec(None, "openai:configured") == "openai:configured"
    monkeypatch.setenv("LOOM_MODEL", "openai:from-env")
    assert choose_model_spec(None, "openai:configured") == "openai:from-env"
    assert choose_model_spec("openai:asked", "openai:configured") == "openai:asked"


async def test_the_face_creates_sessions_with_the_configs_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LOOM_MODEL", raising=False)
    configured = script(tmp_path / "configured.json", "configured")
    from_env = script(tmp_path / "env.json", "from env")
    config = LoomConfig(model=configured)
    async with embedded_runtime(tmp_path / "home", config=config) as runtime, SessionHost(runtime) as host:
        assert runtime.model == configured
        async with Client(build_face(host)) as client:
            first = await client.call_tool("create_session", {"cwd": str(tmp_path)})
            monkeypatch.setenv("LOOM_MODEL", from_env)
            second = await client.call_tool("create_session", {"cwd": str(tmp_path)})
    models: list[Any] = [(r.structured_content or {}).get("model") for r in (first, second)]
    assert models == [configured, from_env]
