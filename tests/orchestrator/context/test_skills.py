from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.context.skills import Skill, SkillError, find_skills, load_skill, render_skills_index


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "loom-home"
    path.mkdir()
    return path.resolve()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    (path / ".git").mkdir(parents=True)
    return path.resolve()


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def skill_md(name: str, description: str, body: str = "Do the thing.\n") -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n{body}"


def user_skill(home: Path, directory: str, text: str) -> Path:
    return write(home / "skills" / directory / "SKILL.md", text)


def project_skill(project: Path, directory: str, text: str) -> Path:
    return write(project / ".loom" / "skills" / directory / "SKILL.md", text)


def test_skills_from_both_places_sorted_with_project_overriding_user(home: Path, project: Path) -> None:
    user_skill(home, "zebra", skill_md("zebra", "User zebra."))
    user_skill(home, "deploy", skill_md("deploy", "User deploy."))
    project_skill(project, "deploy", skill_md("deploy", "Project deploy."))
    project_skill(project, "alpha", skill_md("alpha", "Project alpha."))

    skills, problems = find_skills(home, project)

    assert problems == []
    assert [(s.name, s.description, s.source) for s in skills] == [
        ("alpha", "Project alpha.", "project"),
        ("deploy", "Project deploy.", "project"),
        ("zebra", "User zebra.", "user"),
    ]
    assert skills[1].path == project / ".loom" / "skills" / "deploy"


def test_no_skill_directories_means_no_skills_and_no_problems(home: Path, project: Path) -> None:
    assert find_skills(home, project) == ([], [])


def test_name_comes_from_front_matter_not_directory(home: Path, project: Path) -> None:
    user_skill(home, "some-dir", skill_md("real-name", "Named in front matter."))
    skills, _ = find_skills(home, project)
    assert [s.name for s in skills] == ["real-name"]


def test_folded_multiline_and_quoted_descriptions_are_parsed(home: Path, project: Path) -> None:
    user_skill(
        home,
        "notes",
        "---\nname: notes\ndescription: >\n  Write release notes\n  from the git log.\n---\nBody\n",
    )
    user_skill(home, "quoted", skill_md("quoted", '"Use when: the user says \\"ship it\\"."'))

    skills, problems = find_skills(home, project)

    assert problems == []
    assert {s.name: s.description for s in skills} == {
        "notes": "Write release notes from the git log.",
        "quoted": 'Use when: the user says "ship it".',
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("# Just markdown\n", "no front matter"),
        ("---\nname: x\ndescription: never closed\n", "no front matter"),
        ("---\nname: bad\ndescription: [unclosed\n---\n", "not valid YAML"),
        ("---\n- a\n- b\n---\n", "must be 'name: ...'"),
        ("---\ndescription: No name.\n---\n", "no name"),
        ("---\nname: '  '\ndescription: Blank name.\n---\n", "no name"),
        ("---\nname: Bad Name\ndescription: Spaces.\n---\n", "'Bad Name' is not valid"),
        ("---\nname: -leading\ndescription: Hyphen first.\n---\n", "not valid"),
        (f"---\nname: {'a' * 65}\ndescription: Too long a name.\n---\n", "not valid"),
        ("---\nname: ok\n---\n", "no description"),
        ("---\nname: ok\ndescription: ''\n---\n", "no description"),
        (f"---\nname: ok\ndescription: {'d' * 1025}\n---\n", "at most 1,024"),
        ("---\nname: ok\ndescription: 2024-13-45\n---\n", "not valid YAML"),
    ],
)
def test_invalid_skills_are_reported_with_the_path_and_skipped(
    home: Path, project: Path, text: str, expected: str
) -> None:
    path = project_skill(project, "broken", text)
    project_skill(project, "good", skill_md("good", "Fine."))

    skills, problems = find_skills(home, project)

    assert [s.name for s in skills] == ["good"]
    assert len(problems) == 1
    assert str(path) in problems[0]
    assert expected in problems[0]


def test_unreadable_skill_files_are_reported(home: Path, project: Path) -> None:
    (project_skill(project, "latin", "x")).write_bytes(b"---\nname: latin\ndescription: caf\xe9\n---\n")
    (home / "skills" / "dir-not-file" / "SKILL.md").mkdir(parents=True)

    skills, problems = find_skills(home, project)

    assert skills == []
    assert sorted(problems) == sorted(
        [
            f"cannot read {home / 'skills' / 'dir-not-file' / 'SKILL.md'}: "
            "it is a directory, not a file; replace it with a markdown file",
            f"cannot read {project / '.loom' / 'skills' / 'latin' / 'SKILL.md'}: "
            "not UTF-8 text (byte 0xe9); save it as UTF-8",
        ]
    )


def test_two_skills_with_one_name_in_one_place_keep_the_first(home: Path, project: Path) -> None:
    first = user_skill(home, "a-dir", skill_md("dup", "First."))
    second = user_skill(home, "b-dir", skill_md("dup", "Second."))

    skills, problems = find_skills(home, project)

    assert [(s.name, s.description) for s in skills] == [("dup", "First.")]
    assert len(problems) == 1
    assert str(second) in problems[0]
    assert str(first) in problems[0]
    assert "another name" in problems[0]


def test_hidden_directories_and_dirs_without_skill_md_are_ignored(home: Path, project: Path) -> None:
    user_skill(home, ".hidden", skill_md("hidden", "Hidden."))
    (home / "skills" / "empty").mkdir()
    write(home / "skills" / "README.md", "not a skill")
    assert find_skills(home, project) == ([], [])


def test_load_skill_returns_body_and_lists_other_files(home: Path, project: Path) -> None:
    user_skill(home, "notes", skill_md("notes", "Release notes.", body="# Steps\n\n1. Read the log.\n"))
    write(home / "skills" / "notes" / "scripts" / "collect.py", "print()")
    write(home / "skills" / "notes" / "template.md", "T")
    write(home / "skills" / "notes" / ".cache", "hidden")
    write(home / "skills" / "notes" / ".git" / "config", "hidden")
    (skill,), _ = find_skills(home, project)

    text = load_skill(skill)

    body, listing = text.split("\n\nFiles in this skill", 1)
    assert body == "# Steps\n\n1. Read the log."
    assert "name:" not in text
    assert "loom__skill(name='notes', file=PATH)" in listing
    assert listing.splitlines()[1:] == ["- scripts/collect.py", "- template.md"]


def test_load_skill_without_other_files_is_just_the_body(home: Path, project: Path) -> None:
    user_skill(home, "solo", skill_md("solo", "Alone.", body="Only this.\n"))
    (skill,), _ = find_skills(home, project)
    assert load_skill(skill) == "Only this."


def test_load_skill_lists_at_most_fifty_files(home: Path, project: Path) -> None:
    user_skill(home, "big", skill_md("big", "Many files."))
    for i in range(60):
        write(home / "skills" / "big" / "data" / f"f{i:02}.txt", "")
    (skill,), _ = find_skills(home, project)

    listing = load_skill(skill).splitlines()

    assert sum(line.startswith("- data/") for line in listing) == 50
    assert listing[-1] == "- ... and 10 more"


def test_load_skill_raises_a_skill_error_when_the_file_is_gone(home: Path, project: Path) -> None:
    path = user_skill(home, "gone", skill_md("gone", "Will vanish."))
    (skill,), _ = find_skills(home, project)
    path.unlink()
    with pytest.raises(SkillError, match="cannot read skill 'gone'"):
        load_skill(skill)


def test_render_index_lists_each_skill_on_one_line() -> None:
    skills = [
        Skill("deploy", "Ship the app.", Path("/p/.loom/skills/deploy"), "project"),
        Skill("notes", "Write release\nnotes.", Path("/h/skills/notes"), "user"),
    ]

    rendered = render_skills_index(skills)

    assert "Skills" in rendered.splitlines()[0]
    assert "Load a skill's instructions with loom__skill(name) before doing a task it covers." in rendered
    assert rendered.endswith("- deploy: Ship the app.\n- notes: Write release notes.")


def test_render_index_is_empty_without_skills() -> None:
    assert render_skills_index([]) == ""


def test_a_skills_file_instead_of_a_directory_is_reported(home: Path, project: Path) -> None:
    write(home / "skills", "oops")
    skills, problems = find_skills(home, project)
    assert skills == []
    assert problems == [
        f"cannot read {home / 'skills'}: it is not a directory; skills go in {home / 'skills'}/<name>/SKILL.md"
    ]


def test_a_skill_file_is_read_only_from_inside_the_skill(home: Path, project: Path, tmp_path: Path) -> None:
    from orchestrator.context.skills import SkillError, read_skill_file

    user_skill(home, "notes", skill_md("notes", "Release notes."))
    write(home / "skills" / "notes" / "scripts" / "collect.py", "print('collect')")
    write(tmp_path / "secret.txt", "top secret")
    (home / "skills" / "notes" / "link.txt").symlink_to(tmp_path / "secret.txt")
    (skill,), _ = find_skills(home, project)

    assert read_skill_file(skill, "scripts/collect.py") == "print('collect')"
    for outside in ("../../../secret.txt", str(tmp_path / "secret.txt"), "link.txt", "."):
        with pytest.raises(SkillError, match="is not inside skill 'notes'"):
            read_skill_file(skill, outside)
    with pytest.raises(SkillError, match="cannot read 'nope.txt' of skill 'notes'"):
        read_skill_file(skill, "nope.txt")
