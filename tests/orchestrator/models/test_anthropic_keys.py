"""AnthropicModel: a missing key is known before any call, and a failed connection names the URL it tried."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.models.anthropic import AnthropicModel
from orchestrator.models.base import ModelError
from orchestrator.models.credentials import missing_credentials
from orchestrator.models.scripted import ScriptedModel
from tests.orchestrator.models.fake_anthropic import FakeAnthropic
from tests.orchestrator.models.fake_common import text_reply
from tests.orchestrator.models.helpers import clear_anthropic_credentials, collect, request
from tests.orchestrator.models.live_server import closed_port_url

pytestmark = pytest.mark.anyio

KEY = "sk-ant-test-0123456789"


@pytest.fixture
def no_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    clear_anthropic_credentials(monkeypatch, tmp_path)


@pytest.mark.usefixtures("no_credentials")
def test_a_missing_key_is_known_before_any_call_and_names_the_variable() -> None:
    problem = missing_credentials(AnthropicModel("claude-test", base_url=closed_port_url()))

    assert problem is not None
    assert "ANTHROPIC_API_KEY" in problem and "anthropic:claude-test" in problem
    assert "pass api_key" not in problem  # a Python argument means nothing to a CLI user


@pytest.mark.usefixtures("no_credentials")
async def test_the_call_fails_with_the_same_words_and_is_not_retried() -> None:
    model = AnthropicModel("claude-test", base_url=closed_port_url())

    with pytest.raises(ModelError) as caught:
        await collect(model, request())

    assert str(caught.value) == missing_credentials(model)
    assert not caught.value.transient


@pytest.mark.usefixtures("no_credentials")
async def test_a_key_in_the_environment_or_an_auth_token_is_enough(
    monkeypatch: pytest.MonkeyPatch, fake_anthropic: FakeAnthropic
) -> None:
    assert missing_credentials(AnthropicModel("claude-test", api_key=KEY)) is None
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "a-token")
    assert missing_credentials(AnthropicModel("claude-test")) is None
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN")
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    fake_anthropic.api_key = KEY
    fake_anthropic.script(text_reply("hello"))
    model = AnthropicModel("claude-test", base_url=fake_anthropic.base_url)

    assert missing_credentials(model) is None
    _, response = await collect(model, request())
    assert response.message.text == "hello"


def test_a_scripted_model_needs_no_credentials(tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text('{"turns": [{"text": "hi"}]}', encoding="utf-8")

    assert missing_credentials(ScriptedModel.from_file(script, label="s")) is None


async def test_a_refused_connection_names_the_url_it_tried() -> None:
    base = closed_port_url()

    with pytest.raises(ModelError) as caught:
        await collect(AnthropicModel("claude-test", api_key=KEY, base_url=base), request())

    assert str(caught.value).startswith(f"anthropic: connection to {base}/v1/messages failed: ")
    assert caught.value.transient


async def test_the_url_in_the_error_keeps_a_gateway_path_and_drops_credentials() -> None:
    base = closed_port_url().replace("http://", "http://user:hunter2@") + "/gateway/anthropic"

    with pytest.raises(ModelError) as caught:
        await collect(AnthropicModel("claude-test", api_key=KEY, base_url=base), request())

    assert "/gateway/anthropic/v1/messages" in str(caught.value)
    assert "hunter2" not in str(caught.value) and "user" not in str(caught.value)


async def test_a_timeout_names_the_url_too(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.script(text_reply("late", delay_s=0.5))
    model = AnthropicModel("claude-test", api_key=KEY, base_url=fake_anthropic.base_url, timeout_s=0.1)

    with pytest.raises(ModelError, match="timed out") as caught:
        await collect(model, request())

    assert f"{fake_anthropic.base_url}/v1/messages" in str(caught.value)
