"""The top-level ``goals`` key: the watermark for a handoff and the grader's deadline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.config import ConfigError, load_config_file
from orchestrator.goals.settings import GoalSettings, SettingsError, parse_settings, read_settings


def test_the_settings_are_read_with_defaults_for_what_is_not_given(tmp_path: Path) -> None:
    assert parse_settings({}) == GoalSettings(handoff_at=0.7, grader_timeout_s=900.0)
    assert parse_settings({"handoffAt": None, "graderTimeout": 60}) == GoalSettings(None, 60.0)
    (tmp_path / "config.json").write_text(json.dumps({"goals": {"handoffAt": 0.5}}))
    assert read_settings(tmp_path).handoff_at == 0.5
    assert read_settings(tmp_path / "nowhere") == GoalSettings()


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ({"handoffAt": 0}, "handoffAt must be a number above 0 and at most 1"),
        ({"handoffAt": 1.5}, "handoffAt must be a number above 0 and at most 1"),
        ({"handoffAt": True}, "handoffAt must be a number"),
        ({"graderTimeout": -1}, "graderTimeout must be a number of seconds above 0"),
        ({"handoff": 0.7}, "unknown key 'handoff'; use handoffAt or graderTimeout"),
        ([0.7], "must be an object"),
    ],
)
def test_a_bad_goals_key_is_refused_as_the_config_files_error(tmp_path: Path, raw: object, says: str) -> None:
    with pytest.raises(SettingsError, match=says):
        parse_settings(raw)
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"goals": raw}))
    with pytest.raises(ConfigError, match=f"{path}: goals"):
        load_config_file(path)
