"""Finding definitions in the user's and the project's directories; bad and hostile files never stop the rest."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from orchestrator.agents import AgentDefinition, find_agents, render_agents
from orchestrator.agents.loading import MAX_FILE_BYTES, MAX_FILES
from orchestrator.policy.narrowing import Bounds, NarrowingError


def write(directory: Path, file: str, name: str, description: str = "Does things.", extra: str = "") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / file
    path.write_text(f"---\nname: {name}\ndescription: {description}\n{extra}---\nYou are {name}.\n", encoding="utf-8")
    return path


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path, Path, Path]:
    home, project = tmp_path / "home", tmp_path / "project"
    return home, project, home / "agents", project / ".loom" / "agents"


def test_user_and_project_definitions_and_which_won(dirs: tuple[Path, Path, Path, Path]) -> None:
    home, project, user_dir, project_dir = dirs
    write(user_dir, "reviewer.md", "reviewer", "The user's reviewer.")
    write(user_dir, "scout.md", "scout")
    replaced = user_dir / "reviewer.md"
    write(project_dir, "review.md", "reviewer", "The project's reviewer.")
    write(project_dir, "planner.md", "planner")
    catalog = find_agents(home, project)
    assert list(catalog.agents) == ["planner", "reviewer", "scout"]
    reviewer = catalog.get("reviewer")
    assert reviewer is not None
    assert reviewer.source == "project" and reviewer.description == "The project's reviewer."
    assert reviewer.overrides is not None and reviewer.overrides.resolve() == replaced.resolve()
    scout = catalog.get("scout")
    assert scout is not None and scout.source == "user" and scout.overrides is None
    assert catalog.problems == ()


def test_no_directories_no_agents(dirs: tuple[Path, Path, Path, Path]) -> None:
    home, project, _, _ = dirs
    catalog = find_agents(home, project)
    assert catalog.agents == {} and catalog.problems == ()
    assert render_agents(list(catalog.agents.values())) == ""


def test_bad_files_are_reported_and_the_others_still_load(dirs: tuple[Path, Path, Path, Path]) -> None:
    home, project, user_dir, project_dir = dirs
    write(user_dir, "good.md", "good")
    (user_dir / "broken.md").write_text("---\nname: [oops\n---\n", encoding="utf-8")
    (user_dir / "latin1.md").write_bytes(b"---\nname: caf\xe9\ndescription: x\n---\nbody\n")
    huge = b"---\nname: huge\ndescription: x\n---\n" + b"x" * MAX_FILE_BYTES
    (user_dir / "huge.md").write_bytes(huge)
    write(user_dir, "twin.md", "good")  # same name as good.md, later by file name
    (user_dir / "notes.txt").write_text("not a definition", encoding="utf-8")
    (user_dir / ".draft.md").write_text("---\n", encoding="utf-8")
    write(project_dir, "fine.md", "fine")
    catalog = find_agents(home, project)
    assert list(catalog.agents) == ["fine", "good"]
    problems = "\n".join(catalog.problems)
    assert len(catalog.problems) == 4, problems
    assert f"{user_dir.resolve() / 'broken.md'}: the front matter is not valid YAML" in problems
    assert "latin1.md: not UTF-8 text (byte 0xe9" in problems
    assert f"huge.md: {len(huge):,} bytes; an agent definition may be at most" in problems
    assert "twin.md: name 'good' is already used by" in problems


def test_a_symlink_out_of_the_directory_is_refused_and_one_inside_is_read(
    dirs: tuple[Path, Path, Path, Path], tmp_path: Path
) -> None:
    home, project, user_dir, _ = dirs
    outside = write(tmp_path / "elsewhere", "secret.md", "secret")
    write(user_dir, "real.md", "real")
    (user_dir / "escape.md").symlink_to(outside)
    (user_dir / "zalias.md").symlink_to(user_dir / "real.md")  # same file, same name: reported as a duplicate
    (user_dir / "dangling.md").symlink_to(tmp_path / "missing.md")
    catalog = find_agents(home, project)
    assert list(catalog.agents) == ["real"]
    problems = "\n".join(catalog.problems)
    assert f"escape.md: a symbolic link to {outside.resolve()}, outside {user_dir.resolve()}" in problems
    assert "dangling.md: a symbolic link to" in problems  # resolved outside, so refused before it is opened
    assert "zalias.md: name 'real' is already used by" in problems


def test_a_linked_agents_directory_is_read_where_it_points(dirs: tuple[Path, Path, Path, Path]) -> None:
    """``.loom/agents`` -> ``.claude/agents`` reuses Claude Code's definitions."""
    home, project, _, project_dir = dirs
    claude_dir = project / ".claude" / "agents"
    write(claude_dir, "reviewer.md", "reviewer", extra="tools: Read, Grep\nmodel: haiku\n")
    project_dir.parent.mkdir(parents=True)
    project_dir.symlink_to(claude_dir)
    agent = find_agents(home, project).get("reviewer")
    assert agent is not None and agent.tools == ("fs__read", "fs__grep")


def test_a_fifo_is_refused_without_blocking(dirs: tuple[Path, Path, Path, Path]) -> None:
    home, project, user_dir, _ = dirs
    user_dir.mkdir(parents=True)
    os.mkfifo(user_dir / "pipe.md")
    write(user_dir, "ok.md", "ok")
    catalog = find_agents(home, project)
    assert list(catalog.agents) == ["ok"]
    assert "pipe.md: not a regular file" in catalog.problems[0]


def test_a_directory_with_too_many_files_is_cut(dirs: tuple[Path, Path, Path, Path]) -> None:
    home, project, user_dir, _ = dirs
    for i in range(MAX_FILES + 3):
        write(user_dir, f"a{i:04d}.md", f"a{i:04d}")
    catalog = find_agents(home, project)
    assert len(catalog.agents) == MAX_FILES
    assert f"{MAX_FILES + 3} definition files; only the first {MAX_FILES} by name were read" in catalog.problems[0]


def test_the_project_being_the_homes_parent_reads_the_directory_once(tmp_path: Path) -> None:
    home = tmp_path / ".loom"
    write(home / "agents", "one.md", "one")
    catalog = find_agents(home, tmp_path)
    agent = catalog.get("one")
    assert agent is not None and agent.source == "user" and agent.overrides is None


def test_render_lists_names_and_descriptions_within_bounds(tmp_path: Path) -> None:
    agents = [
        AgentDefinition(f"agent-{i}", f"Line one of {i}.\n  Line two. " + "word " * 100, "", tmp_path, "user")
        for i in range(40)
    ]
    text = render_agents(agents[:2])
    first = text.splitlines()[0]
    assert first.startswith("- agent-0: Line one of 0. Line two. word word")
    assert len(first) <= len("- agent-0: ") + 300 and first.endswith("…")
    long = render_agents(agents, max_chars=2000)
    assert len(long) <= 2000
    assert long.splitlines()[-1].startswith("- ... and ") and long.splitlines()[-1].endswith(" more agents")
    shown = len(long.splitlines()) - 1
    assert long.splitlines()[-1] == f"- ... and {40 - shown} more agents"


def test_a_definition_narrows_its_parent(dirs: tuple[Path, Path, Path, Path], tmp_path: Path) -> None:
    """End to end: a Claude Code definition asking for bypass under an ask parent is refused; its tools narrow."""
    home, project, user_dir, _ = dirs
    write(user_dir, "free.md", "free", extra="permissionMode: bypassPermissions\n")
    write(user_dir, "reader.md", "reader", extra="tools: Read, Grep\n")
    catalog = find_agents(home, project)
    parent = Bounds("the session", "ask", cwd=str(tmp_path), servers=frozenset({"fs", "shell"}))
    free, reader = catalog.get("free"), catalog.get("reader")
    assert free is not None and reader is not None
    with pytest.raises(NarrowingError, match="agent 'free' asks for mode 'bypass'"):
        parent.narrow(free.request())
    child = parent.narrow(reader.request())
    assert child.sees("fs__read") and not child.sees("fs__write") and not child.sees("shell__run")
    assert child.decide("shell__run", None, {"command": "ls"}).verdict == "deny"
