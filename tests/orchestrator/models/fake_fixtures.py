"""Pytest fixtures for the fake model servers, importable from any conftest.

Each server starts once per session (real uvicorn, OS-assigned port); the per-test fixtures reset
its script, request log and expected key before handing it out. To use them elsewhere::

    # tests/clients/conftest.py
    from tests.orchestrator.models.fake_fixtures import (  # noqa: F401
        fake_anthropic,
        fake_anthropic_server,
        fake_openai,
        fake_openai_server,
    )
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.orchestrator.models.fake_anthropic import FakeAnthropic, serve_fake_anthropic
from tests.orchestrator.models.fake_openai import FakeOpenAI, serve_fake_openai


@pytest.fixture(scope="session")
def fake_anthropic_server() -> Iterator[FakeAnthropic]:
    with serve_fake_anthropic() as fake:
        yield fake


@pytest.fixture
def fake_anthropic(fake_anthropic_server: FakeAnthropic) -> Iterator[FakeAnthropic]:
    """The session's fake Anthropic API, with an empty script; ``.base_url`` is its origin."""
    fake_anthropic_server.reset()
    yield fake_anthropic_server
    fake_anthropic_server.reset()


@pytest.fixture(scope="session")
def fake_openai_server() -> Iterator[FakeOpenAI]:
    with serve_fake_openai() as fake:
        yield fake


@pytest.fixture
def fake_openai(fake_openai_server: FakeOpenAI) -> Iterator[FakeOpenAI]:
    """The session's fake OpenAI API, with an empty script; ``.base_url`` ends in ``/v1``."""
    fake_openai_server.reset()
    yield fake_openai_server
    fake_openai_server.reset()
