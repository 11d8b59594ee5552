from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.models import ModelSpecError, default_model_spec, resolve_model


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("claude", "must look like PROVIDER:NAME"),
        ("anthropic:", "must look like PROVIDER:NAME"),
        ("foo:bar", "unknown model provider 'foo'"),
        ("scripted:missing.json", "cannot read script"),
    ],
)
def test_bad_specs_say_what_would_work(tmp_path: Path, spec: str, message: str) -> None:
    with pytest.raises(ModelSpecError, match=message):
        resolve_model(spec, base_dir=tmp_path)


def test_invalid_script_is_refused(tmp_path: Path) -> None:
    (tmp_path / "s.json").write_text('{"turns": [{"tool_calls": [{"arguments": {}}]}]}')
    with pytest.raises(ModelSpecError, match="invalid script"):
        resolve_model("scripted:s.json", base_dir=tmp_path)


def test_each_provider_is_selected_by_its_prefix() -> None:
    assert resolve_model("anthropic:claude-test").name == "anthropic:claude-test"
    assert resolve_model("openai:deepseek-chat").name == "openai:deepseek-chat"
    assert resolve_model("scripted:demo").name == "scripted:demo"  # the spec, not a site-packages path


def test_default_is_anthropic_with_a_key_and_the_demo_without(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert default_model_spec() == "scripted:demo"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    assert default_model_spec().startswith("anthropic:")
