"""What a shell command runs, for deny and ask rules: the program, not the spelling.

``deny rm *`` must stop ``/bin/rm -rf x``, ``'rm' x``, ``sudo -u root env -i nice -n 5 /bin/rm x`` and
``find . -exec rm {} +``; ``deny git push *`` must stop ``git -C dir -c k=v --no-pager push``. :func:`resolve`
turns one simple command into its *forms*: the command as written, then what each wrapper layer runs (see
:mod:`orchestrator.policy.wrappers`), git's subcommand after its global options (see
:mod:`orchestrator.policy.gitargs`), and the commands ``find -exec`` runs. In every form the program word is
reduced to its basename, so ``/usr/bin/curl`` and ``./curl`` are ``curl``: a different file, perhaps, but matching
it to a deny rule is the safe direction. Rules compare forms case-insensitively (see
:meth:`~orchestrator.policy.rules.Rule.matches_program`), since on a case-insensitive filesystem (macOS) ``RM`` runs
``rm``.

What cannot be read with confidence is a *doubt*: a wrapper's unknown option, ``env -S``, a shell or other
runner whose command this check cannot read, a program word that is a glob (``/bin/r?``) or an expansion, an
environment assignment that can change what runs (``PATH=``, ``LD_PRELOAD=``, ``GIT_SSH_COMMAND=`` ...; only a few
locale and display variables count as inert). A deny rule that no form matches cannot vouch for a command with a
doubt, so the policy asks about it, even in ``bypass``.

Allow rules never use any of this: they match the command exactly as written (see
:meth:`~orchestrator.policy.rules.Rule.matches_command`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from orchestrator.policy.gitargs import read_git
from orchestrator.policy.wrappers import OPAQUE, TABLE, unwrap

__all__ = ["Resolution", "program_name", "resolve"]

# Far more layers than any real command; a line past it is built to exhaust the check.
_MAX_DEPTH = 16
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\+?=")
_GLOB = re.compile(r"[*?\[]")
_EXPANSION = re.compile(r"[$`]")
_INERT_ENV = frozenset(
    {"LANG", "LANGUAGE", "TZ", "TERM", "COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR", "CLICOLOR", "CI"}
    | {"PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "PYTHONHASHSEED"}
)
_FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})


@dataclass(frozen=True, slots=True)
class Resolution:
    """What one simple command runs.

    Attributes:
        forms: The command as written, then each command it runs, each with its program word reduced to a name.
        doubt: Why what it runs cannot be known for sure, or ``""``.
    """

    forms: tuple[tuple[str, ...], ...]
    doubt: str = ""


def program_name(word: str) -> str:
    """The name a program word runs: its basename (``/bin/rm`` and ``./rm`` are ``rm``)."""
    return word.rsplit("/", 1)[-1]


def _env_doubt(assignments: Sequence[str], program: str) -> str:
    for word in assignments:
        match = _ASSIGNMENT.match(word)
        name = match.group(1) if match else word
        if name not in _INERT_ENV and not name.startswith("LC_"):
            return f"the environment variable {name} can change what {program or 'the command'} runs"
    return ""


def _find_commands(words: Sequence[str]) -> list[tuple[str, ...]]:
    commands: list[tuple[str, ...]] = []
    i = 1
    while i < len(words):
        if words[i] in _FIND_EXEC:
            end = next((j for j in range(i + 1, len(words)) if words[j] in (";", "+")), len(words))
            if end > i + 1:
                commands.append(tuple(words[i + 1 : end]))
            i = end
        i += 1
    return commands


class _Resolver:
    def __init__(self) -> None:
        self.forms: list[tuple[str, ...]] = []
        self.doubts: list[str] = []

    def doubt(self, why: str) -> None:
        if why:
            self.doubts.append(why)

    def run(self, words: Sequence[str], depth: int) -> None:
        count = next((i for i, word in enumerate(words) if not _ASSIGNMENT.match(word)), len(words))
        prefix, words = words[:count], words[count:]
        if not words:
            return
        word = words[0]
        self.doubt(_env_doubt(prefix, word))
        name = program_name(word)
        if not name:
            self.doubt(f"the program word {word!r} names no program")
            return
        if _EXPANSION.search(word):
            self.doubt(f"the program word {word!r} is an expansion")
        elif _GLOB.search(word):
            self.doubt(f"the program word {word!r} is a pattern the shell expands")
        self.forms.append((name, *words[1:]))
        if depth >= _MAX_DEPTH:
            self.doubt(f"the command nests more than {_MAX_DEPTH} wrappers")
            return
        key = name.casefold()
        if key in TABLE:
            unwrapped = unwrap(key, words[1:])
            self.doubt(unwrapped.doubt)
            self.doubt(_env_doubt(unwrapped.assignments, unwrapped.inner[0] if unwrapped.inner else ""))
            if unwrapped.inner:
                self.run(unwrapped.inner, depth + 1)
        elif key in OPAQUE:
            self.doubt(f"{name!r} runs a command this check cannot read")
        elif key == "git":
            self.git(words)
        elif key.startswith("git-") and len(key) > 4:
            self.forms.append(("git", name[4:], *words[1:]))
        elif key == "find":
            for command in _find_commands(words):
                self.run(command, depth + 1)

    def git(self, words: Sequence[str]) -> None:
        git = read_git(words)
        self.doubt(git.doubt)
        if git.subcommand is None:
            return
        if _GLOB.search(words[git.subcommand]) or _EXPANSION.search(words[git.subcommand]):
            self.doubt(f"the git subcommand {words[git.subcommand]!r} is a pattern or an expansion")
        if git.options:
            self.forms.append(("git", *words[git.subcommand :]))


def resolve(words: Sequence[str]) -> Resolution:
    """The forms of one simple command and any doubt about what it runs.

    Args:
        words: The command's words after quote removal, program word first.

    Returns:
        Its forms, the first being the command as written (with the program reduced to its name), and the first
        doubt found.
    """
    resolver = _Resolver()
    resolver.run(tuple(words), 0)
    return Resolution(tuple(resolver.forms), resolver.doubts[0] if resolver.doubts else "")
