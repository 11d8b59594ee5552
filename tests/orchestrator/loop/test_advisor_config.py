"""The ``advisor`` config key and the per-session mode: what a user writes, and the errors they get for mistakes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.config import AdvisorSettings, ConfigError, load_config, load_config_file
from orchestrator.loop.advisor import AdvisorError, advisor_for
from orchestrator.models.base import Model
from orchestrator.models.scripted import ScriptedModel
from orchestrator.trust import read_project, trust


def write(path: Path, content: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(content))
    return path


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("full", AdvisorSettings(mode="full")),
        ("off", AdvisorSettings()),
        ({"mode": "lightweight", "model": "scripted:adv.json"}, AdvisorSettings("lightweight", "scripted:adv.json")),
        ({"mode": "full", "timeout": 5}, AdvisorSettings(mode="full", timeout_s=5.0)),
    ],
)
def test_the_advisor_key_takes_a_mode_or_an_object(tmp_path: Path, value: object, expected: AdvisorSettings) -> None:
    assert load_config_file(write(tmp_path / "c.json", {"advisor": value})).advisor == expected


def test_without_the_key_the_advisor_is_off(tmp_path: Path) -> None:
    assert load_config_file(write(tmp_path / "c.json", {})).advisor is None
    assert advisor_for(None, lambda spec: ScriptedModel.from_turns([]), ScriptedModel.from_turns([]), cwd=".") is None


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("paranoid", r"advisor: the mode must be 'off', 'lightweight' or 'full', not 'paranoid'"),
        (True, r"advisor must be 'off', 'lightweight' or 'full', or an object"),
        ({"mode": "full", "modle": "x:y"}, r"advisor: unknown key 'modle'; the keys are 'mode', 'model' and 'timeout'"),
        ({"mode": "full", "model": "haiku"}, r"advisor\.model must be a model like 'anthropic:"),
        ({"mode": "full", "model": 3}, r"advisor\.model must be a model like"),
        ({"mode": "full", "timeout": 0}, r"advisor\.timeout must be a positive number of seconds"),
        ({"mode": "full", "timeout": "30"}, r"advisor\.timeout must be a positive number of seconds"),
    ],
)
def test_a_bad_advisor_value_names_the_file_and_the_problem(tmp_path: Path, value: object, message: str) -> None:
    path = write(tmp_path / "c.json", {"advisor": value})
    with pytest.raises(ConfigError, match=message) as info:
        load_config_file(path)
    assert str(path) in str(info.value)


def test_an_untrusted_project_may_ask_for_more_review_but_never_for_less(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "proj"
    write(home / "config.json", {"advisor": "lightweight"})
    write(project / ".loom" / "config.json", {"advisor": "off"})
    weaker = load_config(home, project)
    assert weaker.advisor == AdvisorSettings(mode="lightweight")
    assert any("ignoring its advisor" in note and "loom trust" in note for note in weaker.ignored)
    write(project / ".loom" / "config.json", {"advisor": {"mode": "full", "model": "openai:their-endpoint"}})
    assert load_config(home, project).advisor == AdvisorSettings(mode="lightweight")  # not a model of its choosing
    write(project / ".loom" / "config.json", {"advisor": {"mode": "full", "timeout": 0.001}})
    assert load_config(home, project).advisor == AdvisorSettings(mode="lightweight")  # a timeout is an off switch
    write(project / ".loom" / "config.json", {"advisor": "full"})
    stronger = load_config(home, project)
    assert stronger.advisor == AdvisorSettings(mode="full") and stronger.ignored == ()
    write(project / ".loom" / "config.json", {"advisor": "off"})
    trust(home, project, read_project(project).digest)
    assert load_config(home, project).advisor == AdvisorSettings(mode="off")  # trusted: the project's choice


def test_a_session_s_mode_wins_over_the_config_and_a_bad_one_is_refused() -> None:
    own = ScriptedModel.from_turns([])
    built: list[str] = []

    def resolve(spec: str) -> Model:
        built.append(spec)
        return ScriptedModel.from_turns([])

    configured = AdvisorSettings(mode="off", model="scripted:adv.json", timeout_s=9)
    advisor = advisor_for(configured, resolve, own, cwd="/work", mode="full")
    assert advisor is not None and (advisor.mode, advisor.timeout_s, advisor.cwd) == ("full", 9, "/work")
    assert built == ["scripted:adv.json"] and advisor.model is not own and not advisor.follows_session
    default = advisor_for(AdvisorSettings(mode="lightweight"), resolve, own, cwd=".")
    assert default is not None and default.model is own and default.follows_session  # no model named: the session's
    with pytest.raises(AdvisorError, match="unknown advisor mode 'everything'; use off, lightweight, full"):
        advisor_for(configured, resolve, own, cwd=".", mode="everything")
