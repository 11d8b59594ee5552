"""Model profiles: known windows, config overrides by pattern, a scripted model's own window."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.config import ConfigError, load_config
from orchestrator.models.profiles import DEFAULT_THRESHOLD, DEFAULT_WINDOW, ProfileSettings, profile_for


def test_known_families_have_their_window_and_unknown_models_a_safe_default() -> None:
    assert profile_for("anthropic:claude-sonnet-4-5").context_window == 200_000
    assert profile_for("openai:gpt-4.1-mini").context_window == 1_000_000
    assert profile_for("openai:some-local-llama").context_window == DEFAULT_WINDOW
    assert profile_for("anthropic:claude-sonnet-4-5").compact_threshold == DEFAULT_THRESHOLD == 0.8


def test_the_most_specific_config_pattern_wins_and_fields_merge() -> None:
    settings = {
        "openai:*": ProfileSettings(context_window=32_000),
        "openai:qwen*": ProfileSettings(compact_threshold=0.6),
        "openai:qwen-long": ProfileSettings(context_window=1_000_000),
    }
    assert profile_for("openai:qwen-small", settings).context_window == 32_000
    assert profile_for("openai:qwen-small", settings).compact_threshold == 0.6
    assert profile_for("openai:qwen-long", settings).context_window == 1_000_000
    assert profile_for("anthropic:claude-x", settings).context_window == 200_000


def test_a_models_own_window_counts_unless_config_says_otherwise() -> None:
    assert profile_for("scripted:s.json", own_window=4000).context_window == 4000
    overridden = profile_for("scripted:s.json", {"scripted:*": ProfileSettings(8000)}, own_window=4000)
    assert overridden.context_window == 8000


def test_config_models_section_is_read_and_merged(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "proj"
    (project / ".loom").mkdir(parents=True)
    home.mkdir()
    (home / "config.json").write_text(json.dumps({"models": {"openai:*": {"contextWindow": 32000}}}))
    (project / ".loom" / "config.json").write_text(json.dumps({"models": {"openai:x": {"compactAt": 0.5}}}))
    config = load_config(home, project)
    assert config.profiles == {
        "openai:*": ProfileSettings(32000, None),
        "openai:x": ProfileSettings(None, 0.5),
    }
    profile = profile_for("openai:x", config.profiles)
    assert (profile.context_window, profile.compact_threshold) == (32000, 0.5)


@pytest.mark.parametrize(
    ("models", "message"),
    [
        ([], "must be an object"),
        ({"x:*": 5}, "must be an object with 'contextWindow'"),
        ({"x:*": {"window": 5}}, "unknown key 'window'"),
        ({"x:*": {"contextWindow": 10}}, "at least 1000"),
        ({"x:*": {"contextWindow": "big"}}, "whole number"),
        ({"x:*": {"compactAt": 1.5}}, "between 0.1 and 1"),
    ],
)
def test_bad_models_config_says_what_is_wrong(tmp_path: Path, models: object, message: str) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"models": models}))
    with pytest.raises(ConfigError, match=message) as caught:
        load_config(tmp_path, tmp_path)
    assert "config.json" in str(caught.value)
