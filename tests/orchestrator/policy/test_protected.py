"""A model cannot widen its own permissions: Loom's own configuration is asked about in every mode but bypass."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import types as mt

from orchestrator.policy import MODES, Rule, decide
from orchestrator.policy.protected import Protected

FS_EDIT = mt.ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False)
READ_ONLY = mt.ToolAnnotations(read_only_hint=True)
SHELL = mt.ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=True)
PLANTED = [Rule("allow", "*"), Rule("allow", "shell__run", command="cp *"), Rule("allow", "fs__*", path="**")]
OWN = "a model cannot change its own permissions without a person's approval"


@pytest.fixture
def work(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    (work / "src").mkdir(parents=True)
    (work / "state").mkdir()  # $LOOM_HOME, inside the workspace as ~/.loom is when Loom runs in ~
    (work / "link").symlink_to(work / ".loom", target_is_directory=True)
    return work


@pytest.fixture
def protected(work: Path) -> Protected:
    return Protected.for_session(work / "state", work, work)


def _decide(mode: str, tool: str, annotations: mt.ToolAnnotations | None, arguments: dict[str, Any],
            work: Path, protected: Protected, rules: list[Rule] = PLANTED) -> Any:  # fmt: skip
    return decide(mode, tool, annotations, arguments, rules, str(work), protected)


PROTECTED_PATHS = [
    ".loom/policy.toml",
    ".loom/config.json",
    ".loom/skills/evil/SKILL.md",
    ".LOOM/POLICY.TOML",
    "sub/.loom/policy.toml",
    "AGENTS.md",
    "agents.md",
    "Agents.MD",
    "LOOM.md",
    "pkg/AGENTS.md",
    "state/policy.toml",
    "state/config.json",
    "./src/../state/skills/x/SKILL.md",
    "link/policy.toml",  # a symlink into .loom
    "state",
    ".",  # the workspace holds .loom: deleting or moving it takes .loom along
]


@pytest.mark.parametrize("path", PROTECTED_PATHS)
@pytest.mark.parametrize("tool", ["fs__write", "fs__edit", "fs__delete", "extfs__write_file"])
@pytest.mark.parametrize("mode", ["ask", "accept-edits"])
def test_writing_looms_config_is_asked_about_whatever_the_rules(
    path: str, tool: str, mode: str, work: Path, protected: Protected
) -> None:
    decision = _decide(mode, tool, FS_EDIT, {"path": path, "content": "x"}, work, protected)
    assert decision.verdict == "ask", decision
    assert decision.protected
    assert "would change Loom's own configuration" in decision.reason and OWN in decision.reason


def test_the_reason_says_plainly_what_and_why(work: Path, protected: Protected) -> None:
    decision = _decide("accept-edits", "fs__write", FS_EDIT, {"path": ".loom/policy.toml"}, work, protected)
    assert decision.reason == (
        "fs__write would change Loom's own configuration (.loom/policy.toml); a model cannot change its own "
        "permissions without a person's approval"
    )


def test_an_external_tool_without_annotations_is_covered(work: Path, protected: Protected) -> None:
    decision = _decide("ask", "extfs__write_file", None, {"path": "AGENTS.md"}, work, protected)
    assert decision.verdict == "ask" and decision.protected


def test_any_of_several_paths_counts(work: Path, protected: Protected) -> None:
    arguments = {"source": "src/a.py", "destination": ".loom/policy.toml"}
    assert _decide("accept-edits", "fs__move", FS_EDIT, arguments, work, protected).protected


@pytest.mark.parametrize("mode", MODES)
def test_modes(mode: str, work: Path, protected: Protected) -> None:
    decision = _decide(mode, "fs__write", FS_EDIT, {"path": ".loom/policy.toml"}, work, protected)
    expected = {"ask": "ask", "accept-edits": "ask", "plan": "deny", "bypass": "allow"}[mode]
    assert decision.verdict == expected, decision


def test_deny_rules_still_deny_first(work: Path, protected: Protected) -> None:
    rules = [*PLANTED, Rule("deny", "fs__*", path=".loom/**")]
    decision = _decide("ask", "fs__write", FS_EDIT, {"path": ".loom/policy.toml"}, work, protected, rules)
    assert decision.verdict == "deny" and not decision.protected


def test_reading_is_not_asked_about(work: Path, protected: Protected) -> None:
    decision = _decide("ask", "fs__read", READ_ONLY, {"path": ".loom/policy.toml"}, work, protected, [])
    assert decision.verdict == "allow"


def test_ordinary_edits_are_unchanged(work: Path, protected: Protected) -> None:
    for path in ("src/a.py", "docs/AGENTS.md.bak", "bloom.md", "src/loom.py", "x.loomy/a"):
        decision = _decide("accept-edits", "fs__write", FS_EDIT, {"path": path}, work, protected, [])
        assert decision.verdict == "allow", (path, decision)


def test_without_protection_nothing_changes(work: Path) -> None:
    decision = decide("accept-edits", "fs__write", FS_EDIT, {"path": ".loom/policy.toml"}, [], str(work))
    assert decision.verdict == "allow"


SHELL_MENTIONS = [
    "cat AGENTS.md",
    "cp evil.toml .loom/policy.toml",
    "echo x>AGENTS.md",
    "cp evil.toml .lo''om/policy.toml",
    "cp evil.toml '.loom/policy.toml'",
    "cp evil.toml .LOOM/policy.toml",
    "cp evil.toml .lo?m/policy.toml",
    "cp evil.toml .l[o]om/policy.toml",
    "cp evil.toml AGENTS.m?",
    "cp evil.toml AGENTS.*",
    "rm *",
    "mkdir -p .loom/skills",
    "ln -s evil.toml .loom",
    "tee LOOM.md",
    "mv pkg/agents.md x",
    "cp evil.toml state/policy.toml",
    "cp evil.toml ./state/config.json",
    "cp evil.toml src/../state/config.json",
    "cp evil.toml st?te/config.json",
    "cp --target-directory=state evil.toml",
    "cp evil.toml link/policy.toml",
    "cp evil.toml $LOOM_HOME/policy.toml",
    "cp evil.toml ${LOOM_HOME}/policy.toml",
    "sh -c 'cp evil.toml .loo''m/policy.toml'",
]


@pytest.mark.parametrize("command", SHELL_MENTIONS)
@pytest.mark.parametrize("mode", ["ask", "accept-edits"])
def test_a_shell_command_that_mentions_looms_config_is_asked_about(
    command: str, mode: str, work: Path, protected: Protected
) -> None:
    decision = _decide(mode, "shell__run", SHELL, {"command": command}, work, protected)
    assert decision.verdict == "ask", decision
    assert decision.protected, decision


def test_the_home_path_is_a_mention(work: Path, protected: Protected) -> None:
    for command in (f"cp x {work}/state/policy.toml", f"cp x {work}/st*/policy.toml"):
        decision = _decide("ask", "shell__run", SHELL, {"command": command}, work, protected)
        assert decision.protected, (command, decision)


def test_a_shell_running_inside_looms_config_is_asked_about(work: Path, protected: Protected) -> None:
    (work / ".loom").mkdir()
    decision = _decide("ask", "shell__run", SHELL, {"command": "cp x policy.toml", "cwd": ".loom"}, work, protected)
    assert decision.verdict == "ask" and decision.protected and "runs in '.loom'" in decision.reason


@pytest.mark.parametrize("command", ["ls", "ls -la src", "cp a.py b.py", "find . -name x", "ls *.py", "cat bloom.md"])
def test_other_shell_commands_are_unchanged(command: str, work: Path, protected: Protected) -> None:
    rules = [Rule("allow", "shell__run", command=f"{command.split()[0]} *")]
    assert _decide("ask", "shell__run", SHELL, {"command": command}, work, protected, rules).verdict == "allow"


def test_bypass_runs_shell_commands_that_mention_it(work: Path, protected: Protected) -> None:
    # The sandbox's read-only mounts are what stops these in bypass.
    assert _decide("bypass", "shell__run", SHELL, {"command": "cat AGENTS.md"}, work, protected).verdict == "allow"


def test_covers(tmp_path: Path) -> None:
    protected = Protected(tmp_path / "home", (tmp_path / "project",))
    assert protected.covers(str(tmp_path / "home" / "sessions" / "x.db"))
    assert protected.covers(str(tmp_path / "HOME" / "config.json"))  # as macOS would see it
    assert protected.covers("/anywhere/.loom/policy.toml")
    assert protected.covers("/anywhere/.Loom")
    assert protected.covers("/anywhere/Agents.md")
    assert protected.covers("/anywhere/loom.MD")
    assert protected.covers(str(tmp_path / "project"))  # holds project/.loom
    assert protected.covers(str(tmp_path))  # holds both
    assert not protected.covers(str(tmp_path / "project" / "src" / "a.py"))
    assert not protected.covers(str(tmp_path / "homework" / "a"))
    assert not protected.covers("/anywhere/AGENTS.md.bak")
    assert not protected.inside(str(tmp_path / "project"))


def test_mount_points(tmp_path: Path) -> None:
    protected = Protected.for_session(tmp_path / "home", tmp_path / "project" / "sub", tmp_path / "project")
    project = (tmp_path / "project").resolve()
    assert protected.mount_points() == [
        (tmp_path / "home").resolve(),
        project / ".loom",
        project / "AGENTS.md",
        project / "LOOM.md",
        project / "sub" / ".loom",
        project / "sub" / "AGENTS.md",
        project / "sub" / "LOOM.md",
    ]
    same = Protected.for_session(tmp_path / "home", tmp_path / "project", tmp_path / "project")
    assert same.roots == (project,) and len(same.mount_points()) == 4


def test_for_session_resolves_symlinks(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    protected = Protected.for_session(tmp_path / "alias", tmp_path / "alias", tmp_path / "alias")
    assert protected.home == (tmp_path / "real").resolve() and protected.roots == ((tmp_path / "real").resolve(),)
