"""OpenAICompatModel: which endpoints need a key, and that a call without one is refused before any request."""

from __future__ import annotations

import time

import pytest

from orchestrator.models.base import ModelError
from orchestrator.models.credentials import missing_credentials
from orchestrator.models.openai_compat import DEFAULT_BASE_URL, OpenAICompatModel, key_required
from tests.orchestrator.models.fake_common import text_reply
from tests.orchestrator.models.fake_openai import FakeOpenAI
from tests.orchestrator.models.helpers import collect, request

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def _no_openai_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


@pytest.mark.parametrize(
    ("url", "needs_key"),
    [
        (DEFAULT_BASE_URL, True),
        ("https://api.deepseek.com/v1", True),
        ("http://8.8.8.8:8000/v1", True),
        ("http://127.0.0.1:11434/v1", False),
        ("http://localhost:8000/v1", False),
        ("http://[::1]:8000/v1", False),
        ("http://192.168.1.20:8000/v1", False),
        ("http://10.0.0.7/v1", False),
        ("http://gpu-box.local:8000/v1", False),
        ("http://ollama:11434/v1", False),  # a container's or LAN host's single-label name
    ],
)
def test_only_endpoints_beyond_this_machine_and_network_need_a_key(url: str, needs_key: bool) -> None:
    assert key_required(url) is needs_key


async def test_no_key_and_no_base_url_is_refused_before_any_request() -> None:
    model = OpenAICompatModel("gpt-4o")
    problem = missing_credentials(model)

    assert problem is not None
    assert "OPENAI_API_KEY" in problem and "OPENAI_BASE_URL" in problem and DEFAULT_BASE_URL in problem
    started = time.monotonic()
    with pytest.raises(ModelError) as caught:
        await collect(model, request())
    # Not a DNS failure on the public endpoint, retried: the same refusal, permanent, with no network wait.
    assert str(caught.value) == problem
    assert not caught.value.transient
    assert time.monotonic() - started < 1.0


async def test_a_remote_endpoint_without_a_key_is_refused_and_says_any_value_will_do() -> None:
    problem = missing_credentials(OpenAICompatModel("deepseek-chat", base_url="https://user:pw@api.deepseek.com/v1"))

    assert problem is not None and "OPENAI_API_KEY" in problem and "any value" in problem
    assert "https://api.deepseek.com/v1" in problem and "pw" not in problem


async def test_a_local_server_needs_no_key(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(text_reply("local"))
    model = OpenAICompatModel("llama3", base_url=fake_openai.base_url)

    assert missing_credentials(model) is None
    _, response = await collect(model, request())
    assert response.message.text == "local"


async def test_a_key_from_the_environment_is_enough(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")

    assert missing_credentials(OpenAICompatModel("gpt-4o")) is None
    assert missing_credentials(OpenAICompatModel("deepseek-chat", base_url="https://api.deepseek.com/v1")) is None
