"""Fixtures for the CLI end-to-end tests: the fake model servers (real uvicorn on 127.0.0.1)."""

from __future__ import annotations

from tests.orchestrator.models.fake_fixtures import (  # noqa: F401
    fake_anthropic,
    fake_anthropic_server,
    fake_openai,
    fake_openai_server,
)
