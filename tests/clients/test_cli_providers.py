"""``loom run`` against the real provider clients, talking to fake Anthropic and OpenAI servers.

The fakes speak each provider's real streaming wire format on 127.0.0.1 (real uvicorn); the CLI runs
as a subprocess and finds them through the providers' usual environment variables.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from orchestrator.events import AssistantMessage, ModelRetry, Notice, RunFinished, ToolCallFinished
from tests.clients.cli_support import make_project, run_loom
from tests.orchestrator.models.fake_anthropic import FakeAnthropic
from tests.orchestrator.models.fake_common import (
    HttpError,
    RecordedRequest,
    ScriptedFake,
    ToolCall,
    text_reply,
    tool_reply,
)
from tests.orchestrator.models.fake_openai import FakeOpenAI

API_KEY = "test-key-123"


def _anthropic_tool_results(request: RecordedRequest) -> dict[str, str]:
    """tool_use_id -> result text of every tool_result block in an Anthropic request."""
    found: dict[str, str] = {}
    for message in request.body["messages"]:
        content = message["content"]
        if message["role"] != "user" or isinstance(content, str):
            continue
        for block in content:
            if block.get("type") == "tool_result":
                inner = block["content"]
                found[block["tool_use_id"]] = inner if isinstance(inner, str) else "".join(b["text"] for b in inner)
    return found


def _openai_tool_results(request: RecordedRequest) -> dict[str, str]:
    """tool_call_id -> content of every ``role: tool`` message in a Chat Completions request."""
    return {m["tool_call_id"]: str(m["content"]) for m in request.body["messages"] if m["role"] == "tool"}


@dataclass(frozen=True)
class Provider:
    """How to point the CLI at one fake provider."""

    name: str
    model: str
    fake_fixture: str
    env: Callable[[ScriptedFake, str], dict[str, str]]
    tool_results: Callable[[RecordedRequest], dict[str, str]]
    auth_error: str
    """The message the fake's 401 carries, which the user must get to see."""


PROVIDERS = [
    Provider(
        name="anthropic",
        model="anthropic:claude-test",
        fake_fixture="fake_anthropic",
        env=lambda fake, key: {"ANTHROPIC_BASE_URL": fake.base_url, "ANTHROPIC_API_KEY": key},
        tool_results=_anthropic_tool_results,
        auth_error="invalid x-api-key",
    ),
    Provider(
        name="openai",
        model="openai:test-model",
        fake_fixture="fake_openai",
        env=lambda fake, key: {"OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": key},
        tool_results=_openai_tool_results,
        auth_error="Incorrect API key provided.",
    ),
]


@pytest.fixture(params=PROVIDERS, ids=[p.name for p in PROVIDERS])
def provider(request: pytest.FixtureRequest) -> tuple[Provider, ScriptedFake]:
    chosen: Provider = request.param
    fake: Any = request.getfixturevalue(chosen.fake_fixture)
    assert isinstance(fake, FakeAnthropic | FakeOpenAI)
    return chosen, fake


def test_tool_round_trip_through_the_real_client_after_a_429(
    provider: tuple[Provider, ScriptedFake], tmp_path: Path
) -> None:
    # A rate limit first (retried), then a tool call, then the answer: the common path of a real session.
    spec, fake = provider
    project = make_project(tmp_path / "project")
    fake.api_key = API_KEY
    call_id = f"call_{spec.name}_write_1"
    fake.script(
        HttpError(429, "slow down, please"),
        tool_reply(
            ToolCall("fs__write", {"path": "notes/hello.txt", "content": "hello from the model\n"}, id=call_id),
            text="I'll write the file.",
        ),
        text_reply("The file is written."),
    )

    result = run_loom(
        "run", "--json", "--model", spec.model, "write a hello file", cwd=project, home=tmp_path / "home",
        env=spec.env(fake, API_KEY),
    )  # fmt: skip

    assert result.returncode == 0, result
    assert (project / "notes" / "hello.txt").read_text(encoding="utf-8") == "hello from the model\n"
    events = result.events()
    # The 429 was retried, and the retry is a stored event.
    retries = [e for e in events if isinstance(e, ModelRetry)]
    assert len(retries) == 1, result
    assert retries[0].attempt == 1 and retries[0].step == 1
    assert "429" in retries[0].error and "slow down, please" in retries[0].error
    assert retries[0].seq is not None
    # The model's words and its tool call went through.
    said = [e.message.text for e in events if isinstance(e, AssistantMessage)]
    assert said == ["I'll write the file.", "The file is written."]
    (write,) = [e for e in events if isinstance(e, ToolCallFinished)]
    assert write.call_id == call_id and write.tool == "fs__write" and not write.is_error, write
    finished = events[-1]
    assert isinstance(finished, RunFinished)
    assert (finished.status, finished.steps, finished.final_text) == ("completed", 2, "The file is written.")
    assert not any(isinstance(e, Notice) for e in events)  # a real model: no demo notice
    # What the provider received: the retried request unchanged, then the tool result under the call's id.
    requests = fake.requests
    assert len(requests) == 3, requests
    assert requests[0].body == requests[1].body
    assert requests[1].body["model"] == spec.model.partition(":")[2]
    assert requests[1].body["stream"] is True
    assert "fs__write" in str(requests[1].body["tools"])
    assert spec.tool_results(requests[1]) == {}
    results = spec.tool_results(requests[2])
    assert list(results) == [call_id], requests[2].body
    assert "notes/hello.txt" in results[call_id]
    assert fake.pending == 0


def test_permanent_401_fails_the_run_with_the_providers_message(
    provider: tuple[Provider, ScriptedFake], tmp_path: Path
) -> None:
    spec, fake = provider
    project = make_project(tmp_path / "project")
    fake.api_key = "the-right-key"

    result = run_loom(
        "run", "--model", spec.model, "say something", cwd=project, home=tmp_path / "home",
        env=spec.env(fake, "a-wrong-key"),
    )  # fmt: skip

    assert result.returncode == 1, result
    assert re.search(r"^loom: run r_\w+ failed after 1 step: model error: .*401", result.stderr, re.MULTILINE), result
    assert spec.auth_error in result.stderr, result
    assert "a-wrong-key" not in result.stderr + result.stdout  # never echo a credential
    assert "Traceback" not in result.stderr, result
    assert len(fake.requests) == 1  # a permanent error is not retried


def test_anthropic_without_an_api_key_fails_clearly(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")

    result = run_loom("run", "--model", "anthropic:claude-test", "hello", cwd=project, home=tmp_path / "home")

    assert result.returncode == 2, result
    assert "ANTHROPIC_API_KEY" in result.stderr, result
    assert "Traceback" not in result.stderr, result
