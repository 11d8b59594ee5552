"""Finding agent definitions on disk, and listing them for the model.

Definitions are the ``*.md`` files directly in ``$LOOM_HOME/agents/`` (the user's) and
``<project>/.loom/agents/`` (the project's); a project definition replaces a user definition of the same name,
and says so (:attr:`~orchestrator.agents.definitions.AgentDefinition.overrides`). To reuse Claude Code's, make
``.loom/agents`` a symbolic link to ``.claude/agents``: the directory is resolved before it is read.

A bad file never stops the others from loading: every problem is collected with the file's name and what to fix,
and that file is left out. Files are treated as hostile: a symbolic link that leads out of its directory, a
file that is not a regular file (a FIFO would block the read), one over :data:`MAX_FILE_BYTES` or not UTF-8 is
refused with a message, and at most :data:`MAX_FILES` files are read from a directory. The functions are
synchronous (they touch the filesystem); the caller runs them in a worker thread.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from orchestrator.agents.definitions import AgentDefinition, AgentError, Source, parse_definition

__all__ = ["MAX_FILE_BYTES", "MAX_FILES", "AgentCatalog", "find_agents", "render_agents"]

MAX_FILE_BYTES = 256 * 1024
"""A definition file larger than this is refused, not read: no real one comes close."""
MAX_FILES = 256
"""Definition files read per directory; the rest are reported, not read."""
SUFFIX = ".md"


@dataclass(frozen=True)
class AgentCatalog:
    """The definitions found, and what was wrong with the files left out.

    Attributes:
        agents: The usable definitions by name, sorted by name.
        problems: One message per file left out (naming it and what to fix) or per directory that cannot be read.
    """

    agents: dict[str, AgentDefinition] = field(default_factory=dict[str, AgentDefinition])
    problems: tuple[str, ...] = ()

    @property
    def notes(self) -> tuple[str, ...]:
        """What the usable definitions asked for and did not get (a tool with no Loom equivalent...)."""
        return tuple(note for agent in self.agents.values() for note in agent.notes)

    def get(self, name: str) -> AgentDefinition | None:
        """The definition called ``name``, or None."""
        return self.agents.get(name)


def _canonical(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return path.absolute()


def _read(path: Path, directory: Path) -> str:
    """The text of one definition file; raises :class:`AgentError` when it is not one Loom will read."""
    try:
        # Checked for every file, not only links: one swapped for a link after a check would be followed.
        real = Path(os.path.realpath(path))
        if not real.is_relative_to(directory):
            raise AgentError(
                f"{path}: a symbolic link to {real}, outside {directory}; copy the file into the directory instead"
            )
        # O_NOFOLLOW: the resolved path is not itself followed again if it became a link since.
        # O_NONBLOCK: opening a FIFO would otherwise wait for a writer.
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(real, flags)
    except AgentError:
        raise
    except FileNotFoundError:
        raise AgentError(f"{path}: it does not exist (a broken symbolic link, or deleted)") from None
    except (OSError, RuntimeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise AgentError(f"{path}: cannot open it: {why}; check its permissions") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise AgentError(f"{path}: not a regular file; an agent definition is a markdown file")
        if info.st_size > MAX_FILE_BYTES:
            raise AgentError(f"{path}: {info.st_size:,} bytes; an agent definition may be at most {MAX_FILE_BYTES:,}")
        data = handle.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:  # it grew after fstat
        raise AgentError(f"{path}: over {MAX_FILE_BYTES:,} bytes; an agent definition may be at most that")
    try:
        # utf-8-sig drops the byte-order mark some editors write, which would otherwise hide the opening ---.
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise AgentError(
            f"{path}: not UTF-8 text (byte {data[exc.start]:#04x} at {exc.start}); save it as UTF-8"
        ) from None


def _scan(directory: Path, source: Source) -> tuple[list[AgentDefinition], list[str]]:
    """The definitions directly in ``directory``, in file-name order; the first of two with one name wins."""
    try:
        names = sorted(entry.name for entry in os.scandir(directory))
    except FileNotFoundError:
        return [], []
    except NotADirectoryError:
        return [], [f"cannot read {directory}: it is not a directory; agent definitions go in {directory}/NAME.md"]
    except OSError as exc:
        return [], [f"cannot read {directory}: {exc.strerror or exc}; check its permissions"]
    # Hidden files are editor or tool state, and other files beside definitions (README.txt) are not ones.
    files = [name for name in names if name.endswith(SUFFIX) and not name.startswith(".")]
    problems: list[str] = []
    if len(files) > MAX_FILES:
        problems.append(f"{directory}: {len(files)} definition files; only the first {MAX_FILES} by name were read")
        files = files[:MAX_FILES]
    found: dict[str, AgentDefinition] = {}
    for name in files:
        path = directory / name
        try:
            agent = parse_definition(_read(path, directory), path, source)
        except AgentError as exc:
            problems.append(str(exc))
            continue
        if agent is None:
            continue
        earlier = found.get(agent.name)
        if earlier is not None:
            problems.append(
                f"{path}: name {agent.name!r} is already used by {earlier.path}; give one of them another name "
                "(this one was left out)"
            )
            continue
        found[agent.name] = agent
    return list(found.values()), problems


def find_agents(home: Path, project: Path | None) -> AgentCatalog:
    """Find the user's and the project's agent definitions.

    Args:
        home: Loom's home (``$LOOM_HOME``); definitions are in ``home/agents/*.md``.
        project: The project root, whose definitions are in ``.loom/agents/*.md``; None for the user's only.

    Returns:
        The catalog: a project definition replaces a user one of the same name (its ``overrides`` names the
        replaced file), and every file left out has a problem.
    """
    user_dir = _canonical(home / "agents")
    agents, problems = _scan(user_dir, "user")
    chosen = {agent.name: agent for agent in agents}
    project_dir = _canonical(project / ".loom" / "agents") if project is not None else None
    # When the project is the home's parent, ~/.loom/agents is both places: read it once, as the user's.
    if project_dir is not None and project_dir != user_dir:
        project_agents, project_problems = _scan(project_dir, "project")
        problems.extend(project_problems)
        for agent in project_agents:
            replaced = chosen.get(agent.name)
            chosen[agent.name] = replace(agent, overrides=replaced.path) if replaced is not None else agent
    return AgentCatalog(dict(sorted(chosen.items())), tuple(problems))


MAX_LISTING_CHARS = 4000
"""How much of a tool description the list of agents may take by default."""
_MAX_LINE_DESCRIPTION = 300


def render_agents(agents: Sequence[AgentDefinition], max_chars: int = MAX_LISTING_CHARS) -> str:
    """The agents as the spawn tool's description lists them: ``- name: description``, one per line.

    Args:
        agents: Definitions, in the order to list them.
        max_chars: The most the listing may take; descriptions are cut to 300 characters, and the agents that
            do not fit are counted on a last line instead.

    Returns:
        The lines, or ``""`` when there are no agents.
    """
    lines: list[str] = []
    used = 0
    for index, agent in enumerate(agents):
        # A multi-line description (YAML '|' block) would break the list; the model needs the words, not the layout.
        words = " ".join(agent.description.split())
        if len(words) > _MAX_LINE_DESCRIPTION:
            words = words[: _MAX_LINE_DESCRIPTION - 1].rstrip() + "…"
        line = f"- {agent.name}: {words}"
        left = len(agents) - index - 1
        # Keep room for the "and N more" line unless this is the last agent.
        tail = len(f"- ... and {len(agents)} more agents") + 1 if left else 0
        if used + len(line) + 1 + tail > max_chars:
            lines.append(f"- ... and {len(agents) - index} more agents")
            break
        lines.append(line)
        used += len(line) + 1
    return "\n".join(lines)
