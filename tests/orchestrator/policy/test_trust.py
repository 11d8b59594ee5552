"""Trust in a project's own config: what an untrusted project may not loosen, and when trust lapses."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from orchestrator.config import ShellOptions, load_config, loosens
from orchestrator.trust import TRUST_FILE, forget, load_trusted_rules, read_project, trust, trust_state

POLICY = """
[[rules]]
action = "allow"
tool = "shell__run"

[[rules]]
action = "deny"
tool = "shell__run"
command = "rm *"

[[rules]]
action = "ask"
tool = "fs__write"
"""


def project_with(tmp_path: Path, config: dict[str, object] | None = None, policy: str | None = None) -> Path:
    project = tmp_path / "project"
    (project / ".loom").mkdir(parents=True)
    if config is not None:
        (project / ".loom" / "config.json").write_text(json.dumps(config), encoding="utf-8")
    if policy is not None:
        (project / ".loom" / "policy.toml").write_text(policy, encoding="utf-8")
    return project


SERVER = {"command": "/bin/true"}


def test_an_untrusted_project_adds_no_servers_and_loosens_no_sandbox(tmp_path: Path) -> None:
    home = tmp_path / "home"
    config = {"mcpServers": {"evil": SERVER}, "shell": {"sandbox": "off"}, "toolTimeouts": {"fs__grep": 5}}
    project = project_with(tmp_path, config)
    loaded = load_config(home, project)
    assert loaded.servers == ()
    assert loaded.shell is None
    assert loaded.tool_timeouts_s == {"fs__grep": 5.0}  # tightening or harmless settings apply at once
    assert len(loaded.ignored) == 2
    assert all("loom trust" in note and "not trusted" in note for note in loaded.ignored)


def test_trusting_applies_it_and_a_change_lapses_the_trust(tmp_path: Path) -> None:
    home = tmp_path / "home"
    project = project_with(tmp_path, {"mcpServers": {"evil": SERVER}})
    trust(home, project, read_project(project).digest)
    assert trust_state(home, project, read_project(project).digest) == "trusted"
    assert [s.name for s in load_config(home, project).servers] == ["evil"]
    assert stat.S_IMODE(os.stat(home / TRUST_FILE).st_mode) == 0o600

    # A change to either file, even the one that was not there, is a new digest.
    (project / ".loom" / "policy.toml").write_text(POLICY, encoding="utf-8")
    assert trust_state(home, project, read_project(project).digest) == "changed"
    loaded = load_config(home, project)
    assert loaded.servers == () and "changed since you trusted it" in loaded.ignored[0]
    assert forget(home, project) and not forget(home, project)
    assert trust_state(home, project, read_project(project).digest) == "untrusted"


def test_untrusted_allow_rules_are_left_out_and_deny_and_ask_rules_apply(tmp_path: Path) -> None:
    home = tmp_path / "home"
    project = project_with(tmp_path, policy=POLICY)
    rules, notes = load_trusted_rules(home, project)
    assert [r.action for r in rules] == ["deny", "ask"]
    assert len(notes) == 1 and "allow rule" in notes[0] and "loom trust" in notes[0]
    trust(home, project, read_project(project).digest)
    rules, notes = load_trusted_rules(home, project)
    assert [r.action for r in rules] == ["allow", "deny", "ask"] and notes == []


def test_the_users_own_files_always_apply(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.json").write_text(json.dumps({"mcpServers": {"mine": SERVER}}), encoding="utf-8")
    (home / "policy.toml").write_text('[[rules]]\naction = "allow"\ntool = "x__*"\n', encoding="utf-8")
    project = tmp_path / "plain"
    project.mkdir()
    assert [s.name for s in load_config(home, project).servers] == ["mine"]
    assert [r.action for r in load_trusted_rules(home, project)[0]] == ["allow"]


@pytest.mark.parametrize(
    ("project", "user", "looser"),
    [
        (ShellOptions(sandbox="off"), ShellOptions(), True),
        (ShellOptions(sandbox="auto"), ShellOptions(sandbox="bwrap"), True),
        (ShellOptions(network=True), ShellOptions(network=False), True),
        (ShellOptions(env=("GITHUB_TOKEN",)), ShellOptions(), True),
        (ShellOptions(sandbox="bwrap"), ShellOptions(), False),
        (ShellOptions(network=False), ShellOptions(), False),
        (ShellOptions(env=("A",)), ShellOptions(env=("A", "B")), False),
    ],
)
def test_what_loosens_the_shell(project: ShellOptions, user: ShellOptions, looser: bool) -> None:
    assert loosens(project, user) is looser


def test_a_stricter_project_shell_applies_untrusted(tmp_path: Path) -> None:
    project = project_with(tmp_path, {"shell": {"network": False}})
    loaded = load_config(tmp_path / "home", project)
    assert loaded.shell == ShellOptions(network=False) and loaded.ignored == ()
