"""Instruction files (``AGENTS.md``, ``LOOM.md``) that a session's system prompt includes.

Users tell agents how to work in plain markdown files, and the convention shared by several agent tools is
``AGENTS.md``; ``LOOM.md`` is for instructions meant only for Loom. They are read in layers, from most general
to most specific, so that a project can refine the user's habits and a subdirectory can refine the project:

1. the user's Loom home (``$LOOM_HOME``, scope ``user``),
2. the project root, found by :func:`project_root` (scope ``project``),
3. the working directory, when it is not the project root (scope ``directory``).

Within a directory ``AGENTS.md`` comes before ``LOOM.md``. A bad file must not stop a session from starting, so
nothing here raises on one: problems come back as strings for the caller to show. The functions are synchronous
because they touch the filesystem; the caller runs them in a worker thread.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

INSTRUCTION_NAMES = ("AGENTS.md", "LOOM.md")
"""File names read in every layer, in this order."""

MAX_FILE_CHARS = 32_000
"""Longer files are cut so that one runaway file cannot fill the model's context."""

Scope = Literal["user", "project", "directory"]


@dataclass(frozen=True)
class InstructionFile:
    """One instruction file as it will appear in the system prompt.

    Attributes:
        path: Where the file was found.
        scope: Which layer it belongs to.
        text: Its contents, at most :data:`MAX_FILE_CHARS` characters.
        truncated: Whether the file was longer and ``text`` was cut.
    """

    path: Path
    scope: Scope
    text: str
    truncated: bool


def canonical(path: Path) -> Path:
    """``path`` made absolute and canonical, or just absolute if it cannot be resolved (e.g. a symlink loop)."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return path.absolute()


def _user_home() -> Path | None:
    try:
        return canonical(Path.home())
    except (KeyError, RuntimeError):
        # No $HOME and no passwd entry (some containers): there is simply no boundary to respect.
        return None


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except OSError:
        return False


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:
        return False


def project_root(cwd: Path) -> Path:
    """The project that ``cwd`` belongs to.

    This is the nearest ancestor of ``cwd`` (``cwd`` included) that contains ``.git`` (a directory, or a file as
    in worktrees and submodules) or a ``.loom`` directory. The search never goes above the user's home directory
    when ``cwd`` is inside it, and the home directory's own ``.loom`` does not count: it is usually the Loom home,
    not a project marker.

    Args:
        cwd: The session's working directory.

    Returns:
        The project root (resolved), or ``cwd`` itself (resolved) when no marker is found.
    """
    start = canonical(cwd)
    home = _user_home()
    for directory in (start, *start.parents):
        if _exists(directory / ".git"):
            return directory
        if directory == home:
            # Reaching $HOME means cwd is inside it: stop here. ~/.loom is Loom's own home by default, so taking
            # it as a project marker would make every directory under $HOME look like one project.
            break
        if _is_dir(directory / ".loom"):
            return directory
    return start


def _read_instruction_file(path: Path, scope: Scope) -> tuple[InstructionFile | None, str | None]:
    """Read one candidate file: ``(file, None)``, ``(None, problem)``, or ``(None, None)`` when it is absent."""
    try:
        info = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None, None
    except OSError as exc:
        return None, f"cannot read {path}: {exc.strerror or exc}; check its permissions"
    if stat.S_ISDIR(info.st_mode):
        return None, f"cannot read {path}: it is a directory, not a file; rename it or replace it with a file"
    if not stat.S_ISREG(info.st_mode):
        # Opening a FIFO or device would block or read forever.
        return None, f"cannot read {path}: not a regular file; replace it with a plain text file"
    try:
        # utf-8-sig drops the byte-order mark some editors write; reading one character past the limit is
        # enough to know whether the file was cut, without loading a huge file into memory.
        with path.open(encoding="utf-8-sig") as f:
            text = f.read(MAX_FILE_CHARS + 1)
    except UnicodeDecodeError as exc:
        return None, f"cannot read {path}: not UTF-8 text (byte {exc.object[exc.start]:#04x}); save it as UTF-8"
    except OSError as exc:
        return None, f"cannot read {path}: {exc.strerror or exc}; check its permissions"
    truncated = len(text) > MAX_FILE_CHARS
    return InstructionFile(path=path, scope=scope, text=text[:MAX_FILE_CHARS], truncated=truncated), None


def load_instructions(home: Path, cwd: Path) -> tuple[list[InstructionFile], list[str]]:
    """Read the instruction files that apply to a session in ``cwd``.

    Missing files are skipped silently. A file that exists but cannot be used (unreadable, not UTF-8, a
    directory) is reported in the problems list instead of raising. Each file is read at most once, even when
    the working directory is the project root or two names lead to the same file through a symlink; it keeps
    the scope of its first (most general) layer. Files that are empty or only whitespace are skipped because
    they would add nothing but a heading.

    Args:
        home: The user's Loom home (``$LOOM_HOME``).
        cwd: The session's working directory.

    Returns:
        The files in layer order (user, project, directory; ``AGENTS.md`` before ``LOOM.md`` within a layer),
        and human-readable problems, each naming the file.
    """
    root = project_root(cwd)
    directory = canonical(cwd)
    layers: list[tuple[Path, Scope]] = [(canonical(home), "user"), (root, "project")]
    if directory != root:
        layers.append((directory, "directory"))

    files: list[InstructionFile] = []
    problems: list[str] = []
    seen: set[Path] = set()
    for layer_dir, scope in layers:
        for name in INSTRUCTION_NAMES:
            path = layer_dir / name
            key = canonical(path)
            if key in seen:
                continue
            seen.add(key)
            found, problem = _read_instruction_file(path, scope)
            if problem is not None:
                problems.append(problem)
            elif found is not None and found.text.strip():
                files.append(found)
    return files, problems


def render_instructions(files: Sequence[InstructionFile]) -> str:
    """The "Instructions" section of the system prompt.

    Args:
        files: Files from :func:`load_instructions`, most general first.

    Returns:
        Markdown with one ``### <scope>: <path>`` subsection per file, or ``""`` when there are no files.
    """
    if not files:
        return ""
    parts = [
        "## Instructions",
        "The user and the project left these instructions in files. They are listed from most general to most "
        "specific: where two of them conflict, follow the later one.",
    ]
    for file in files:
        body = file.text.strip("\n")
        if file.truncated:
            body += f"\n\n(cut at {MAX_FILE_CHARS:,} characters)"
        parts.append(f"### {file.scope}: {file.path}\n\n{body}")
    return "\n\n".join(parts)
