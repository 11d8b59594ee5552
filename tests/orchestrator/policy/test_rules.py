"""Rule files: loading, precedence between user and project, and errors that name the file and the line or rule."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import types as mt

from orchestrator.policy import PolicyError, Rule, decide, load_rules
from orchestrator.policy.rules import load_file, parse_rules, policy_files

SHELL = mt.ToolAnnotations(read_only_hint=False, destructive_hint=True)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("LOOM_HOME", str(home))
    return home


def test_missing_files_mean_no_rules(home: Path, tmp_path: Path) -> None:
    assert load_rules(tmp_path / "project") == []


def test_files_load_user_then_project(home: Path, tmp_path: Path) -> None:
    project = tmp_path / "project"
    assert policy_files(project) == [home / "policy.toml", project / ".loom" / "policy.toml"]
    write(home / "policy.toml", '[[rules]]\naction = "allow"\ntool = "shell__run"\ncommand = "git status"\n')
    write(
        project / ".loom" / "policy.toml",
        '[[rules]]\naction = "deny"\ntool = "fs__*"\npath = "secrets/**"\n\n'
        '[[rules]]\naction = "ask"\ntool = "github__*"\n',
    )
    rules = load_rules(project)
    assert [(r.action, r.tool, r.command, r.path) for r in rules] == [
        ("allow", "shell__run", "git status", None),
        ("deny", "fs__*", None, "secrets/**"),
        ("ask", "github__*", None, None),
    ]
    assert rules[0].source == f"{home / 'policy.toml'}: rules[0]"
    assert rules[2].source.endswith("policy.toml: rules[1]")


def test_project_allow_cannot_loosen_user_deny(home: Path, tmp_path: Path) -> None:
    project = tmp_path / "project"
    write(home / "policy.toml", '[[rules]]\naction = "deny"\ntool = "shell__run"\ncommand = "git push"\n')
    write(project / ".loom" / "policy.toml", '[[rules]]\naction = "allow"\ntool = "shell__run"\ncommand = "git *"\n')
    rules = load_rules(project)
    push = decide("ask", "shell__run", SHELL, {"command": "git push --force"}, rules, str(project))
    assert push.verdict == "deny" and "git push" in push.reason and "rules[0]" in push.reason
    assert decide("ask", "shell__run", SHELL, {"command": "git log"}, rules, str(project)).verdict == "allow"


def test_user_ask_beats_project_allow(home: Path, tmp_path: Path) -> None:
    project = tmp_path / "project"
    write(home / "policy.toml", '[[rules]]\naction = "ask"\ntool = "shell__run"\ncommand = "git commit"\n')
    write(project / ".loom" / "policy.toml", '[[rules]]\naction = "allow"\ntool = "shell__run"\n')
    rules = load_rules(project)
    assert decide("ask", "shell__run", SHELL, {"command": "git commit -m x"}, rules, str(project)).verdict == "ask"
    assert decide("ask", "shell__run", SHELL, {"command": "make test"}, rules, str(project)).verdict == "allow"


def test_order_of_files_does_not_decide(tmp_path: Path) -> None:
    a = write(tmp_path / "a.toml", '[[rules]]\naction = "allow"\ntool = "*"\n')
    b = write(tmp_path / "b.toml", '[[rules]]\naction = "deny"\ntool = "github__*"\n')
    for files in ([a, b], [b, a]):
        rules = load_rules(None, files)
        assert decide("bypass", "github__merge", None, {}, rules, str(tmp_path)).verdict == "deny"
        assert decide("ask", "github__merge", None, {}, rules[:0], str(tmp_path)).verdict == "ask"


def test_toml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    bad = write(tmp_path / "policy.toml", '[[rules]]\naction = "allow"\ntool = shell__run\n')
    with pytest.raises(PolicyError) as info:
        load_file(bad)
    message = str(info.value)
    assert str(bad) in message and "line 3" in message


@pytest.mark.parametrize(
    ("text", "index", "words"),
    [
        ('[[rules]]\naction = "allow"\ntool = "x"\n[[rules]]\naction = "permit"\ntool = "y"\n', 1, "action"),
        ('[[rules]]\naction = "allow"\n', 0, "tool"),
        ('[[rules]]\naction = "allow"\ntool = ""\n', 0, "tool"),
        ('[[rules]]\naction = "allow"\ntool = "x"\ncomand = "git"\n', 0, "comand"),
        ('[[rules]]\naction = "allow"\ntool = "x"\ncommand = "git"\npath = "a"\n', 0, "not both"),
        ('[[rules]]\naction = "allow"\ntool = "x"\ncommand = "git \'status"\n', 0, "cannot be split"),
        ('[[rules]]\naction = "allow"\ntool = "x"\ncommand = "* status"\n', 0, "program name"),
        ('[[rules]]\naction = "allow"\ntool = "x"\ncommand = 3\n', 0, "command"),
        ('[[rules]]\naction = "deny"\ntool = "x"\npath = ""\n', 0, "path"),
        ('[[rules]]\naction = "deny"\ntool = "x"\n[[rules]]\n[[rules]]\n[[rules]]\naction = "x"\n', 1, "action"),
    ],
)
def test_semantic_error_names_file_and_rule(tmp_path: Path, text: str, index: int, words: str) -> None:
    bad = write(tmp_path / "policy.toml", text)
    with pytest.raises(PolicyError) as info:
        load_file(bad)
    message = str(info.value)
    assert f"{bad}: rules[{index}]" in message
    assert words in message


@pytest.mark.parametrize(
    ("text", "words"),
    [("rules = 3\n", "array of tables"), ('[rule]\naction = "allow"\n', "unknown top-level key"), ("x = 1\n", "x")],
)
def test_bad_shape_names_the_file(text: str, words: str) -> None:
    with pytest.raises(PolicyError, match=words) as info:
        parse_rules(text, "/p/policy.toml")
    assert str(info.value).startswith("/p/policy.toml: ")


def test_bad_user_file_is_an_error_not_a_fallback(home: Path, tmp_path: Path) -> None:
    write(home / "policy.toml", "[[rules]\n")
    with pytest.raises(PolicyError, match="policy.toml: invalid TOML"):
        load_rules(tmp_path)


def test_unreadable_file_is_an_error(tmp_path: Path) -> None:
    bad = tmp_path / "policy.toml"
    bad.write_bytes(b"\xff\xfe")
    with pytest.raises(PolicyError, match="cannot read"):
        load_file(bad)


def test_command_pattern_matches_whole_words() -> None:
    from orchestrator.policy import parse

    rule = Rule("allow", "shell__run", command="git log *")
    assert rule.matches_command(parse("git log").commands[0])
    assert rule.matches_command(parse("git log --oneline -5").commands[0])
    assert not rule.matches_command(parse("git logs").commands[0])
    assert not rule.matches_command(parse("git").commands[0])
    star = Rule("allow", "shell__run", command="npm * test")
    assert star.matches_command(parse("npm run test").commands[0])
    assert not star.matches_command(parse("npm run build").commands[0])


def test_path_glob_is_matched_against_resolved_paths(tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / "src").mkdir(parents=True)
    link = tmp_path / "link"
    link.symlink_to(work)
    rule = Rule("deny", "fs__*", path="src/**")
    resolved = str((work / "src" / "a.py").resolve())
    assert rule.matches_path(resolved, str(work))
    assert rule.matches_path(resolved, str(link))  # the rule's literal part is resolved too
    assert rule.matches_path(str((work / "src").resolve()), str(work))
    assert not rule.matches_path(str((work / "srcx").resolve()), str(work))
    one = Rule("deny", "fs__*", path="*.env")
    assert one.matches_path(str(work.resolve() / "a.env"), str(work))
    assert not one.matches_path(str(work.resolve() / "src" / "a.env"), str(work))
