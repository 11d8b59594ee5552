"""Loom's own configuration, which no tool may change without a person saying so.

A model that can write ``.loom/policy.toml`` can allow itself anything; one that can write ``AGENTS.md`` or
``LOOM.md`` can tell its next session what to do. So the policy asks before any call that is not read-only and
names a protected path, in every mode but ``bypass``, and no allow rule (a planted one is exactly the attack) nor
accept-edits' workspace default overrides that. Protected are:

- everything inside ``$LOOM_HOME`` (user config, rules, sessions);
- any path with a component named ``.loom``, anywhere (a project's config and rules);
- any file named ``AGENTS.md`` or ``LOOM.md``, anywhere (instructions a session reads);
- a directory that holds ``$LOOM_HOME`` or a root's ``.loom`` (moving or deleting it takes them along).

Names compare case-insensitively, since macOS filesystems are: ``.LOOM/POLICY.TOML`` is the same file there. A hard
link made elsewhere to a protected file cannot be told from any other file; the shell sandbox mounts
:meth:`Protected.mount_points` read-only, which does not depend on names.

For a shell command the policy cannot know which files it writes, so :meth:`Protected.mentioned_in` looks at its
words: a mention of a protected name or of ``$LOOM_HOME`` is asked about like a protected path. Words are read
with quotes removed and ``~`` expanded; globs such as ``.l?om``, ``AGENTS.m?`` or ``*`` are matched against the
names; relative words are resolved against the directory the command runs in (``state/policy.toml`` when the home
is ``./state``); the part after ``=`` counts (``--target-directory=.loom``); a word holding a command line of its
own (``sh -c '...'``) is read as one. The shell tool's ``cwd`` argument counts too. Every mention counts, reads
too: telling ``cat AGENTS.md`` from ``sed -i ... AGENTS.md`` would take the understanding of commands this check
does not have, and a shell command is asked about anyway unless an allow rule matched, so the only effect is that
no allow rule admits a command that touches Loom's configuration. It is a second line of defence, not a proof:
``rm -rf .`` names nothing protected; the sandbox's read-only mounts cover that.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from orchestrator.policy.paths import realpath

__all__ = ["NAMES", "Protected"]

# Protected names as they compare (casefolded): the project directory and the instruction files.
NAMES = (".loom", "agents.md", "loom.md")
_DIRECTORY = ".loom"
_FILES = frozenset({"agents.md", "loom.md"})
_SHOWN = {".loom": ".loom", "agents.md": "AGENTS.md", "loom.md": "LOOM.md"}
# A name as a whole word or path component of the raw line: "x>AGENTS.md" and "--file=.loom/p" mention one,
# "bloom.md" and ".loomy" do not.
_NAME_IN_TEXT = re.compile(r"(?<![\w.-])(\.loom|agents\.md|loom\.md)(?![\w.-])")
# sh -c "sh -c '...'" nests; past this, a line is built to exhaust the check (and is never allowed by a rule anyway).
_MAX_DEPTH = 4
# "$LOOM_HOME" in a command names the home whatever it is set to.
_HOME_VARIABLE = re.compile(r"\$\{?loom_home\b")


def _resolve(path: Path) -> Path:
    try:
        return path.expanduser().resolve()
    except (OSError, RuntimeError, ValueError):
        # An unresolvable directory is still protected, as written.
        return Path(os.path.abspath(path))


def _within(path: str, root: str) -> bool:
    path, root = path.casefold(), root.casefold().rstrip("/")
    return path == root or path.startswith(root + "/")


def _glob_matches(pattern: str, name: str) -> bool:
    return fnmatch.fnmatchcase(name, pattern.casefold()) if any(ch in pattern for ch in "*?[") else False


@dataclass(frozen=True, slots=True)
class Protected:
    """Loom's own configuration: what no tool may write without a person saying so.

    Attributes:
        home: ``$LOOM_HOME``, resolved.
        roots: The project root and the session's working directory, resolved.
    """

    home: Path
    roots: tuple[Path, ...]

    @classmethod
    def for_session(cls, home: Path, cwd: Path, project: Path) -> Protected:
        """The protected paths of one session.

        Args:
            home: ``$LOOM_HOME``.
            cwd: The session's working directory.
            project: The project root.

        Returns:
            The protection, with every path resolved (as written where it cannot be).
        """
        roots: list[Path] = []
        for root in (project, cwd):
            resolved = _resolve(root)
            if resolved not in roots:
                roots.append(resolved)
        return cls(_resolve(home), tuple(roots))

    def covers(self, resolved: str) -> bool:
        """Whether a resolved path is Loom's own configuration (see the module docstring for what is).

        Args:
            resolved: An absolute path with symlinks resolved.
        """
        if self.inside(resolved):
            return True
        holders = [str(self.home), *(str(root / ".loom") for root in self.roots)]
        return any(_within(holder, resolved) for holder in holders)

    def inside(self, resolved: str) -> bool:
        """Whether a resolved path is itself protected (:meth:`covers` also counts a directory holding some).

        Args:
            resolved: An absolute path with symlinks resolved.
        """
        parts = [part.casefold() for part in resolved.split("/") if part]
        if _DIRECTORY in parts or (parts and parts[-1] in _FILES):
            return True
        return _within(resolved, str(self.home))

    def mount_points(self) -> list[Path]:
        """The paths the shell sandbox mounts read-only, whether they exist or not.

        Returns:
            ``home``, then ``ROOT/.loom``, ``ROOT/AGENTS.md`` and ``ROOT/LOOM.md`` for each root.
        """
        points = [self.home]
        for root in self.roots:
            points.extend(root / name for name in (".loom", "AGENTS.md", "LOOM.md"))
        return list(dict.fromkeys(points))

    def mentioned_in(self, command: str, cwd: str | None = None, *, depth: int = 0) -> str:
        """The protected name or path a shell command line mentions, or ``""``.

        Args:
            command: The command line as the shell would receive it.
            cwd: The directory the command runs in (resolved), against which relative words are resolved; None
                checks absolute words only.
            depth: How many command lines inside words (``sh -c '...'``) have been read to get here.

        Returns:
            What it mentions, for a message (``AGENTS.md``, ``.loom``, the home path, the pattern that matches).
        """
        text = command.casefold()
        found = _NAME_IN_TEXT.search(text)
        if found:
            return _SHOWN[found.group(1)]
        home = str(self.home)
        if _HOME_VARIABLE.search(text) or re.search(re.escape(home.casefold()) + r"(?![\w.-])", text):
            return home
        for word in _words(command):
            # A word holding a command line of its own (sh -c '...'): read it as one, a few levels deep.
            if depth < _MAX_DEPTH and any(ch.isspace() for ch in word):
                mention = self.mentioned_in(word, cwd, depth=depth + 1)
                if mention:
                    return mention
            # "--file=state/policy.toml": the program reads the part after "=" as a path.
            for part in dict.fromkeys((word, word.partition("=")[2])):
                mention = self._word_mentions(os.path.expanduser(part), cwd) if part else ""
                if mention:
                    return mention
        return ""

    def _word_mentions(self, word: str, cwd: str | None) -> str:
        """A mention in one word after quote removal: a name (also as a glob), a path into the home."""
        components = [part for part in word.split("/") if part]
        for part in components:
            folded = part.casefold()
            if folded in _SHOWN:
                return _SHOWN[folded]
            # The files first: "*" matches AGENTS.md in any shell, .loom only with dotglob.
            for name, shown in reversed(_SHOWN.items()):
                if _glob_matches(part, name):
                    return f"{shown} (through the pattern {word!r})"
        if not word.startswith("/") and cwd is None:
            return ""
        path = os.path.join(cwd or "/", word)
        if any(ch in word for ch in "*?["):
            parts = [part for part in os.path.normpath(path).split("/") if part]
            home_parts = [part for part in str(self.home).split("/") if part]
            pairs = list(zip(parts, home_parts, strict=False))
            if len(parts) >= len(home_parts) and all(
                a.casefold() == b.casefold() or _glob_matches(a, b.casefold()) for a, b in pairs
            ):
                return f"{self.home} (through the pattern {word!r})"
            return ""
        try:
            resolved = realpath(path)
        except OSError:
            return f"{word!r}, a path that cannot be resolved"
        return f"{word} ({resolved})" if self.inside(resolved) else ""


def _words(command: str) -> list[str]:
    """The command's words with quotes removed and operators split off (``x>AGENTS.md`` is three)."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:
        return command.split()
