"""Skills: packaged instructions the model loads only when a task needs them.

A skill is a directory holding a ``SKILL.md`` in the format Anthropic's agent skills use: YAML front matter
with a ``name`` and a ``description``, then a markdown body, and optionally other files (scripts, references)
beside it::

    ---
    name: release-notes
    description: >
      Write release notes from the git log. Use when the user asks for a changelog.
    ---
    # How to write release notes
    ...

Only the names and descriptions go into the system prompt (:func:`render_skills_index`), so that many skills
cost little context; the model fetches a body with the ``loom__skill`` tool (:func:`load_skill`) when it needs
one. Skills live in ``$LOOM_HOME/skills/<dir>/SKILL.md`` (the user's) and ``<project>/.loom/skills/<dir>/SKILL.md``
(the project's); a project skill replaces a user skill of the same name. Skills are identified by the ``name``
in their front matter, not by their directory, though by convention the directory has the same name.

A broken skill must not stop a session from starting, so discovery reports problems instead of raising. The
functions are synchronous; the caller runs them in a worker thread.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from orchestrator.context.instructions import canonical

SKILL_FILE = "SKILL.md"
NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
"""What a skill name may look like (matched in full): it is typed into tool calls, so keep it simple."""
MAX_DESCRIPTION_CHARS = 1024
"""Descriptions all go into every system prompt; a long one crowds out the others."""
MAX_LISTED_FILES = 50
"""How many of a skill's extra files :func:`load_skill` lists; a skill with a vendored tree should not flood it."""
_MAX_COUNTED_FILES = 10_000
"""Where counting a skill's files stops, so that a skill with a huge vendored tree still loads quickly."""

Source = Literal["user", "project"]

_NAME_RULE = "use lowercase letters, digits and hyphens, starting with a letter or digit, at most 64 characters"


class SkillError(Exception):
    """A skill that was found at startup can no longer be loaded; the message says what to do."""


@dataclass(frozen=True)
class Skill:
    """A skill found by :func:`find_skills`.

    Attributes:
        name: The ``name`` from the front matter.
        description: The ``description`` from the front matter, without surrounding whitespace.
        path: The skill's directory (the one holding ``SKILL.md``).
        source: Whether it came from the user's Loom home or from the project.
    """

    name: str
    description: str
    path: Path
    source: Source


def split_front_matter(text: str) -> tuple[str, str] | None:
    """``(front matter, body)`` when ``text`` starts with a ``---`` line and has a closing one, else ``None``."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return None
    for i in range(1, len(lines)):
        if lines[i].rstrip() == "---":
            return "".join(lines[1:i]), "".join(lines[i + 1 :])
    return None


def _read_skill_file(path: Path) -> str:
    """The text of a ``SKILL.md``; raises ``OSError`` / ``UnicodeDecodeError`` / ``ValueError`` when unusable."""
    info = os.stat(path)
    if stat.S_ISDIR(info.st_mode):
        raise ValueError("it is a directory, not a file; replace it with a markdown file")
    if not stat.S_ISREG(info.st_mode):
        # Reading a FIFO or device would block or never end.
        raise ValueError("not a regular file; replace it with a markdown file")
    # utf-8-sig drops the byte-order mark some editors write, which would otherwise hide the opening ---.
    return path.read_text(encoding="utf-8-sig")


def _describe_read_error(exc: Exception) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text (byte {exc.object[exc.start]:#04x}); save it as UTF-8"
    if isinstance(exc, FileNotFoundError):
        return "it does not exist (a broken symbolic link, or deleted); restore it or remove the skill's directory"
    if isinstance(exc, OSError):
        return f"{exc.strerror or exc}; check its permissions"
    return str(exc)


def _parse_skill(skill_file: Path, source: Source) -> tuple[Skill | None, str | None]:
    """One ``SKILL.md`` parsed into a :class:`Skill`, or a problem naming the file and what to fix."""
    try:
        text = _read_skill_file(skill_file)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return None, f"cannot read {skill_file}: {_describe_read_error(exc)}"
    split = split_front_matter(text)
    if split is None:
        return None, (
            f"{skill_file}: no front matter; start the file with a line '---', then 'name: ...' and "
            "'description: ...', then a line '---'"
        )
    import yaml  # only when there is a skill to read: every `loom` start would pay for it otherwise

    try:
        meta: Any = yaml.safe_load(split[0])
    except Exception as exc:
        # Not only YAMLError: a value such as 2024-13-45 parses as a date and then fails with ValueError, and a
        # bad file must be reported, never raised.
        where = ""
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            # The front matter starts on line 2 of the file.
            where = f" at line {mark.line + 2}"
        problem = getattr(exc, "problem", None) or str(exc)
        return (
            None,
            f"{skill_file}: the front matter is not valid YAML{where} ({problem}); "
            "put values in quotes if they contain ': ' or look like dates",
        )
    if not isinstance(meta, dict):
        return None, f"{skill_file}: the front matter must be 'name: ...' and 'description: ...' lines"

    name = meta.get("name")
    if name is None or (isinstance(name, str) and not name.strip()):
        return None, f"{skill_file}: no name; add 'name: <skill-name>' to the front matter ({_NAME_RULE})"
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        return None, f"{skill_file}: name {name!r} is not valid; {_NAME_RULE}"

    description = meta.get("description")
    if description is None or (isinstance(description, str) and not description.strip()):
        return None, (
            f"{skill_file}: no description; add 'description: ...' to the front matter saying what the skill "
            "does and when to use it"
        )
    if not isinstance(description, str):
        return None, f"{skill_file}: the description must be text; put it in quotes"
    description = description.strip()
    if len(description) > MAX_DESCRIPTION_CHARS:
        return None, (
            f"{skill_file}: the description is {len(description):,} characters; shorten it to at most "
            f"{MAX_DESCRIPTION_CHARS:,} and move details into the body"
        )
    return Skill(name=name, description=description, path=skill_file.parent, source=source), None


def _scan(skills_dir: Path, source: Source) -> tuple[list[Skill], list[str]]:
    """Skills directly under ``skills_dir``, first by directory name winning a name clash."""
    try:
        entries = sorted(skills_dir.iterdir())
    except FileNotFoundError:
        return [], []
    except NotADirectoryError:
        return [], [f"cannot read {skills_dir}: it is not a directory; skills go in {skills_dir}/<name>/SKILL.md"]
    except OSError as exc:
        return [], [f"cannot read {skills_dir}: {exc.strerror or exc}; check its permissions"]

    skills: list[Skill] = []
    problems: list[str] = []
    by_name: dict[str, Skill] = {}
    for entry in entries:
        # Hidden entries are tooling (.git, editor state), not skills; plain files beside skills are ignored.
        if entry.name.startswith("."):
            continue
        skill_file = entry / SKILL_FILE
        try:
            if not entry.is_dir() or not os.path.lexists(skill_file):
                continue
        except OSError as exc:
            problems.append(f"cannot read {entry}: {exc.strerror or exc}; check its permissions")
            continue
        skill, problem = _parse_skill(skill_file, source)
        if problem is not None:
            problems.append(problem)
            continue
        assert skill is not None
        earlier = by_name.get(skill.name)
        if earlier is not None:
            problems.append(
                f"{skill_file}: name {skill.name!r} is already used by {earlier.path / SKILL_FILE}; "
                "give one of them another name (this one was skipped)"
            )
            continue
        by_name[skill.name] = skill
        skills.append(skill)
    return skills, problems


def find_skills(home: Path, project: Path) -> tuple[list[Skill], list[str]]:
    """Find the user's and the project's skills.

    Args:
        home: The user's Loom home (``$LOOM_HOME``); skills are in ``home/skills/<dir>/SKILL.md``.
        project: The project root; skills are in ``project/.loom/skills/<dir>/SKILL.md``.

    Returns:
        The usable skills sorted by name, a project skill replacing a user skill of the same name, and
        human-readable problems, each naming the file and what to fix. A skill with a problem is left out.
    """
    user_dir = canonical(home / "skills")
    project_dir = canonical(project / ".loom" / "skills")
    user_skills, problems = _scan(user_dir, "user")
    chosen = {skill.name: skill for skill in user_skills}
    # When the project is the home directory, ~/.loom/skills is both places: read it once, as the user's.
    if project_dir != user_dir:
        project_skills, project_problems = _scan(project_dir, "project")
        problems.extend(project_problems)
        chosen.update({skill.name: skill for skill in project_skills})
    return sorted(chosen.values(), key=lambda skill: skill.name), problems


def _other_files(directory: Path) -> tuple[list[str], int]:
    """Up to :data:`MAX_LISTED_FILES` non-hidden files under ``directory`` except ``SKILL.md``, and the total."""
    found: list[str] = []
    for root, dirs, names in os.walk(directory):
        if len(found) >= _MAX_COUNTED_FILES:
            break
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            if name.startswith("."):
                continue
            relative = Path(root, name).relative_to(directory).as_posix()
            if relative != SKILL_FILE:
                found.append(relative)
    found.sort()
    return found[:MAX_LISTED_FILES], len(found)


def load_skill(skill: Skill) -> str:
    """A skill's instructions, as the ``loom__skill`` tool returns them to the model.

    Args:
        skill: A skill from :func:`find_skills`.

    Returns:
        The body of ``SKILL.md`` (everything after the front matter), followed by a list of the other files in
        the skill's directory when it has any.

    Raises:
        SkillError: ``SKILL.md`` can no longer be read (it changed since the session started).
    """
    skill_file = skill.path / SKILL_FILE
    try:
        text = _read_skill_file(skill_file)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise SkillError(
            f"cannot read skill {skill.name!r} at {skill_file}: {_describe_read_error(exc)}; "
            "fix the file and start a new session, or carry on without the skill"
        ) from exc
    split = split_front_matter(text)
    # The front matter was valid at startup; if it has been broken since, the whole file is still worth reading.
    body = (split[1] if split is not None else text).strip()

    listed, total = _other_files(skill.path)
    if not listed:
        return body
    lines = [
        f"Files in this skill (read one with loom__skill(name={skill.name!r}, file=PATH), PATH as listed):",
        *(f"- {name}" for name in listed),
    ]
    if total >= _MAX_COUNTED_FILES:
        lines.append("- ... and thousands more")
    elif total > len(listed):
        lines.append(f"- ... and {total - len(listed)} more")
    return f"{body}\n\n" + "\n".join(lines)


MAX_SKILL_FILE_CHARS = 64_000
"""The most of one skill file ``loom__skill(name, file)`` returns."""


def read_skill_file(skill: Skill, relative: str) -> str:
    """One of the files beside a skill's ``SKILL.md``, as text.

    The path is resolved (links included) and must stay inside the skill's directory: a skill in the
    user's Loom home is outside the workspace the fs tools are confined to, so this is how the model
    reads its templates and scripts, and it must not become a way to read anything else.

    Raises:
        SkillError: the path leaves the skill's directory, is not a file, or is not UTF-8 text.
    """
    root = skill.path.resolve()
    target = (root / relative).resolve()
    if not target.is_relative_to(root) or target == root:
        raise SkillError(f"{relative!r} is not inside skill {skill.name!r}; use a path from the skill's file list")
    try:
        with target.open(encoding="utf-8") as handle:
            text = handle.read(MAX_SKILL_FILE_CHARS + 1)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise SkillError(f"cannot read {relative!r} of skill {skill.name!r}: {_describe_read_error(exc)}") from exc
    if len(text) > MAX_SKILL_FILE_CHARS:
        return text[:MAX_SKILL_FILE_CHARS] + f"\n[cut at {MAX_SKILL_FILE_CHARS:,} characters]"
    return text


def render_skills_index(skills: Sequence[Skill]) -> str:
    """The "Skills" section of the system prompt: one line per skill.

    Args:
        skills: Skills from :func:`find_skills`.

    Returns:
        Markdown listing each skill as ``- name: description``, or ``""`` when there are none.
    """
    if not skills:
        return ""
    # A multi-line description (YAML '|' block) would break the list; the model needs the words, not the layout.
    lines = [f"- {skill.name}: {' '.join(skill.description.split())}" for skill in skills]
    return "\n\n".join(
        [
            "## Skills",
            "Load a skill's instructions with loom__skill(name) before doing a task it covers.",
            "\n".join(lines),
        ]
    )
