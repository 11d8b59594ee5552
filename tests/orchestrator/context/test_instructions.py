from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.context.instructions import (
    MAX_FILE_CHARS,
    InstructionFile,
    load_instructions,
    project_root,
    render_instructions,
)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake user home; projects live inside it so that the search for a root stops there."""
    user_home = tmp_path / "home"
    user_home.mkdir()
    monkeypatch.setenv("HOME", str(user_home))
    return user_home.resolve()


@pytest.fixture
def loom_home(home: Path) -> Path:
    path = home / ".loom"
    path.mkdir()
    return path


@pytest.fixture
def project(home: Path) -> Path:
    path = home / "code" / "app"
    (path / ".git").mkdir(parents=True)
    return path


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def summary(files: list[InstructionFile]) -> list[tuple[str, str, str]]:
    return [(f.scope, f.path.name, f.text) for f in files]


def test_project_root_is_the_nearest_directory_with_git(project: Path) -> None:
    deep = project / "src" / "pkg"
    deep.mkdir(parents=True)
    assert project_root(deep) == project
    assert project_root(project) == project


def test_project_root_accepts_a_git_file_as_in_worktrees(home: Path) -> None:
    worktree = home / "wt"
    write(worktree / ".git", "gitdir: /elsewhere\n")
    (worktree / "sub").mkdir()
    assert project_root(worktree / "sub") == worktree


def test_project_root_accepts_a_loom_directory(home: Path) -> None:
    proj = home / "notes"
    (proj / ".loom").mkdir(parents=True)
    (proj / "a" / "b").mkdir(parents=True)
    assert project_root(proj / "a" / "b") == proj


def test_project_root_falls_back_to_cwd_and_ignores_the_loom_home(loom_home: Path, home: Path) -> None:
    # ~/.loom exists (it is the Loom home), but that must not make $HOME the project of every directory.
    plain = home / "scratch" / "dir"
    plain.mkdir(parents=True)
    assert project_root(plain) == plain
    assert project_root(home) == home


def test_project_root_does_not_climb_above_home(tmp_path: Path, home: Path) -> None:
    # A marker above $HOME (here, in its parent) belongs to someone else's tree.
    (tmp_path / ".git").mkdir()
    inside = home / "x"
    inside.mkdir()
    assert project_root(inside) == inside


def test_layers_go_user_then_project_then_directory_with_both_names(loom_home: Path, project: Path) -> None:
    write(loom_home / "LOOM.md", "user loom")
    write(loom_home / "AGENTS.md", "user agents")
    write(project / "LOOM.md", "project loom")
    write(project / "AGENTS.md", "project agents")
    sub = project / "web"
    write(sub / "AGENTS.md", "web agents")

    files, problems = load_instructions(loom_home, sub)

    assert problems == []
    assert summary(files) == [
        ("user", "AGENTS.md", "user agents"),
        ("user", "LOOM.md", "user loom"),
        ("project", "AGENTS.md", "project agents"),
        ("project", "LOOM.md", "project loom"),
        ("directory", "AGENTS.md", "web agents"),
    ]
    assert files[-1].path == sub / "AGENTS.md"


def test_cwd_at_project_root_reads_each_file_once(loom_home: Path, project: Path) -> None:
    write(project / "AGENTS.md", "project agents")
    files, problems = load_instructions(loom_home, project)
    assert problems == []
    assert summary(files) == [("project", "AGENTS.md", "project agents")]


def test_a_symlinked_file_is_read_once(loom_home: Path, project: Path) -> None:
    write(project / "AGENTS.md", "shared")
    (project / "LOOM.md").symlink_to(project / "AGENTS.md")
    files, _ = load_instructions(loom_home, project)
    assert summary(files) == [("project", "AGENTS.md", "shared")]


def test_missing_files_are_not_problems(loom_home: Path, project: Path) -> None:
    assert load_instructions(loom_home, project) == ([], [])


def test_bad_files_are_reported_not_raised(loom_home: Path, project: Path) -> None:
    (project / "AGENTS.md").write_bytes(b"caf\xe9 latin-1\n")
    (project / "LOOM.md").mkdir()
    write(loom_home / "AGENTS.md", "still read")

    files, problems = load_instructions(loom_home, project)

    assert summary(files) == [("user", "AGENTS.md", "still read")]
    assert len(problems) == 2
    assert problems[0].startswith(f"cannot read {project / 'AGENTS.md'}: ")
    assert "UTF-8" in problems[0]
    assert problems[1].startswith(f"cannot read {project / 'LOOM.md'}: ")
    assert "directory" in problems[1]


def test_long_files_are_cut_and_marked(loom_home: Path, project: Path) -> None:
    write(project / "AGENTS.md", "x" * (MAX_FILE_CHARS + 500))
    write(project / "LOOM.md", "y" * MAX_FILE_CHARS)
    files, _ = load_instructions(loom_home, project)
    assert [(len(f.text), f.truncated) for f in files] == [(MAX_FILE_CHARS, True), (MAX_FILE_CHARS, False)]
    rendered = render_instructions(files)
    assert rendered.count("(cut at 32,000 characters)") == 1


def test_render_lists_files_in_order_with_scope_and_path(loom_home: Path, project: Path) -> None:
    write(loom_home / "AGENTS.md", "Be terse.")
    write(project / "AGENTS.md", "Use tabs.")
    files, _ = load_instructions(loom_home, project)

    rendered = render_instructions(files)

    assert "Instructions" in rendered.splitlines()[0]
    assert "conflict" in rendered
    user_at = rendered.index(f"### user: {loom_home / 'AGENTS.md'}\n\nBe terse.")
    project_at = rendered.index(f"### project: {project / 'AGENTS.md'}\n\nUse tabs.")
    assert user_at < project_at
    assert "cut at" not in rendered


def test_render_is_empty_without_files() -> None:
    assert render_instructions([]) == ""
