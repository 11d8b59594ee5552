"""Reading hooks files: Claude Code's shape, clear errors naming the file and key, and trust for a project's file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.config import ConfigError
from orchestrator.hooks import load_hooks, parse_hooks
from orchestrator.trust import read_project, trust, untrusted_notes
from tests.orchestrator.hooks.support import handler, write_hooks


def test_a_claude_code_settings_file_is_read_for_its_hooks_and_the_rest_ignored() -> None:
    settings = {
        "permissions": {"allow": ["Bash(ls:*)"]},
        "env": {"X": "1"},
        "hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": [handler("check.sh", timeout=5)]}],
            "Stop": [{"hooks": [handler("stop.sh", onError="allow")]}],
        },
    }
    config = parse_hooks(json.dumps(settings), "settings.json")
    [pre] = config.of("PreToolUse")
    [stop] = config.of("Stop")
    assert (pre.command, pre.timeout_s, pre.on_error, pre.matches(("Bash",)), pre.matches(("Bashful",))) == (
        "check.sh",
        5.0,
        "block",
        True,
        False,
    )
    assert (stop.on_error, stop.timeout_s, stop.matches(("anything",))) == ("allow", 60.0, True)


@pytest.mark.parametrize(
    ("hooks", "names"),
    [
        ({"BeforeTool": []}, ["hooks.BeforeTool", "unknown event", "PreToolUse"]),
        ({"Stop": {"hooks": []}}, ["hooks.Stop", "list"]),
        ({"Stop": [{"hooks": [{"command": "x", "onError": "maybe"}]}]}, ["hooks.Stop[0].hooks[0].onError"]),
        ({"Stop": [{"hooks": [{"command": "x", "timout": 3}]}]}, ["hooks.Stop[0].hooks[0]", "'timout'"]),
        ({"Stop": [{"hooks": [{"type": "prompt", "prompt": "x"}]}]}, ["hooks.Stop[0].hooks[0]"]),
        ({"PreToolUse": [{"matcher": "Bash(", "hooks": []}]}, ["hooks.PreToolUse[0].matcher", "regular expression"]),
        ({"Stop": [{"hooks": [{"command": ""}]}]}, ["hooks.Stop[0].hooks[0].command"]),
        ({"Stop": [{"hooks": [{"command": "x", "timeout": -1}]}]}, ["hooks.Stop[0].hooks[0].timeout"]),
    ],
)
def test_a_bad_shape_is_an_error_naming_the_file_and_the_key(hooks: object, names: list[str]) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_hooks(json.dumps({"hooks": hooks}), "/home/me/.loom/hooks.json")
    message = str(caught.value)
    assert message.startswith("/home/me/.loom/hooks.json: ")
    for name in names:
        assert name in message


def test_invalid_json_says_where() -> None:
    with pytest.raises(ConfigError, match=r"hooks.json:1:\d+: invalid JSON"):
        parse_hooks('{"hooks": ', "hooks.json")


def test_an_untrusted_projects_hooks_are_ignored_with_a_sentence_until_it_is_trusted(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    write_hooks(home / "hooks.json", {"Stop": [{"hooks": [handler("mine.sh")]}]})
    write_hooks(project / ".loom" / "hooks.json", {"PreToolUse": [{"hooks": [handler("theirs.sh")]}]})
    config, ignored = load_hooks(home, project)
    assert [h.command for h in config.handlers] == ["mine.sh"]
    [sentence] = ignored
    assert "hooks.json" in sentence and "theirs.sh" in sentence and "not trusted" in sentence
    assert "loom trust" in sentence
    assert any("theirs.sh" in note for note in untrusted_notes(home, project))  # `loom run` asks about it

    trust(home, project, read_project(project).digest)
    config, ignored = load_hooks(home, project)
    assert [h.command for h in config.handlers] == ["mine.sh", "theirs.sh"] and ignored == []

    # The digest covers the hooks file: a changed hook is not the one that was trusted.
    write_hooks(project / ".loom" / "hooks.json", {"PreToolUse": [{"hooks": [handler("swapped.sh")]}]})
    config, ignored = load_hooks(home, project)
    assert [h.command for h in config.handlers] == ["mine.sh"]
    assert "changed since you trusted it" in ignored[0]


def test_trust_shows_the_hooks_file_and_a_project_with_only_hooks_has_something_to_trust(tmp_path: Path) -> None:
    project = tmp_path / "project"
    write_hooks(project / ".loom" / "hooks.json", {"Stop": [{"hooks": [handler("x.sh")]}]})
    snapshot = read_project(project)
    assert snapshot.digest is not None
    assert [path.name for path, _ in snapshot.shown()] == ["hooks.json"]
