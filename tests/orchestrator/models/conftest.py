"""Fixtures for the model provider tests: the fake servers."""

from __future__ import annotations

from tests.orchestrator.models.fake_fixtures import (  # noqa: F401
    fake_anthropic,
    fake_anthropic_server,
    fake_openai,
    fake_openai_server,
)
