"""Git's global options (``git -C DIR -c k=v --no-pager push``): where the subcommand is, and what came before it.

A deny rule ``git push *`` means the push, however it is spelled, so the policy looks for the subcommand after
git's global options, read as ``git.c`` reads them: exact names (git does not accept abbreviations here), ``-C``
and ``-c`` with their argument in the next word, ``--git-dir``/``--work-tree``/``--namespace``/``--config-env``/
``--super-prefix``/``--attr-source`` with ``=VALUE`` or the next word. What cannot be read with confidence is a
*doubt*: an unknown option, a missing argument, ``--exec-path=DIR`` (git then runs its commands from DIR), and a
``-c``/``--config-env`` setting other than a few inert ones, since configuration can define aliases and name
programs git runs (``alias.*``, ``core.pager``, ``core.sshCommand``, ``core.fsmonitor`` ...).

The same reading tells :mod:`orchestrator.policy.risky` which global options an allow rule would be waving
through in front of an allowed form.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["GitCommand", "INERT_OPTIONS", "read_git"]

_FLAGS = frozenset(
    {
        "-p",
        "--paginate",
        "-P",
        "--no-pager",
        "--bare",
        "--no-replace-objects",
        "--no-lazy-fetch",
        "--no-optional-locks",
        "--no-advice",
        "--literal-pathspecs",
        "--glob-pathspecs",
        "--noglob-pathspecs",
        "--icase-pathspecs",
    }
)
_WITH_VALUE = frozenset({"--git-dir", "--work-tree", "--namespace", "--config-env", "--super-prefix", "--attr-source"})
_NEXT_WORD = frozenset({"-C", "-c"})
# Options after which git prints something and runs no subcommand.
_LOOKUP = frozenset({"--version", "-v", "--help", "-h", "--html-path", "--man-path", "--info-path", "--exec-path"})
# Global options that change neither which repository or configuration git reads nor what it runs.
INERT_OPTIONS = frozenset(
    {
        "-P",
        "--no-pager",
        "-p",
        "--paginate",
        "--no-replace-objects",
        "--no-lazy-fetch",
        "--no-optional-locks",
        "--no-advice",
        "--literal-pathspecs",
        "--glob-pathspecs",
        "--noglob-pathspecs",
        "--icase-pathspecs",
        "--namespace",
    }
)
# Settings that cannot make git run anything or read another repository (keys compare case-insensitively).
_INERT_KEYS = ("user.name", "user.email", "color.*", "advice.*", "core.quotepath", "init.defaultbranch", "column.*")


@dataclass(frozen=True, slots=True)
class GitCommand:
    """A git command line read up to its subcommand.

    Attributes:
        options: ``(index, option)`` for each global option, ``option`` as git names it (``-c``, ``--git-dir``);
            the last one is the option that could not be read, if any.
        subcommand: The index of the subcommand word, or None when git runs none (``git --version``) or when it
            cannot be found.
        doubt: Why what git runs cannot be known for sure, or ``""``.
    """

    options: tuple[tuple[int, str], ...]
    subcommand: int | None
    doubt: str = ""


def _setting_doubt(option: str, value: str) -> str:
    key = value.split("=", 1)[0].casefold()
    if any(fnmatch.fnmatchcase(key, inert) for inert in _INERT_KEYS):
        return ""
    return f"git {option} {key} can make git run another program or read another repository's configuration"


def read_git(words: Sequence[str]) -> GitCommand:
    """Read a git command line's global options.

    Args:
        words: The whole command, ``words[0]`` being git.

    Returns:
        The global options, the subcommand's index and any doubt.
    """
    options: list[tuple[int, str]] = []
    doubt = ""
    i = 1
    while i < len(words):
        word = words[i]
        if not word.startswith("-"):
            return GitCommand(tuple(options), i, doubt)
        name, eq, value = word.partition("=")
        if word in _LOOKUP or name == "--list-cmds":
            return GitCommand(tuple(options), None, doubt)
        if name == "--exec-path" and eq:
            options.append((i, name))
            doubt = doubt or f"git {word} runs git's commands from another directory"
            i += 1
        elif word in _FLAGS:
            options.append((i, word))
            i += 1
        elif word in _NEXT_WORD or (name in _WITH_VALUE and not eq):
            options.append((i, name))
            if i + 1 >= len(words):
                return GitCommand(tuple(options), None, f"git {word} needs an argument")
            if name in ("-c", "--config-env"):
                doubt = doubt or _setting_doubt(name, words[i + 1])
            i += 2
        elif name in _WITH_VALUE:
            options.append((i, name))
            if name == "--config-env":
                doubt = doubt or _setting_doubt(name, value)
            i += 1
        else:
            options.append((i, name))
            return GitCommand(tuple(options), None, f"git {name} is not a global option this check knows")
    return GitCommand(tuple(options), None, doubt)
