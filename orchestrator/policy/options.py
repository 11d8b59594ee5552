"""Reading a command's options the way ``getopt_long`` does, for the policy's wrapper and risky-form checks.

A program's options are described by :class:`Options`: which short letters are plain flags, which take an argument
(attached, ``-uroot``, or the next word, ``-u root``), which take an optional argument that must be attached
(``xargs -i{}``), and the same for long options (``--user root``, ``--user=root``, ``--eof[=STR]``). Long options
may be abbreviated to any unambiguous prefix, as GNU ``getopt_long`` allows, so ``timeout --sig=KILL`` is
``--signal``. :func:`scan` turns words into :class:`Token` s, one per option or operand, and says what it could
not read rather than guessing: an unknown option or a missing argument is a token with a ``problem``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

__all__ = ["Options", "Token", "scan"]

# nice's legacy "-5" / "--5" / "-+5" adjustment.
_NUMERIC = re.compile(r"-[+-]?\d+")


@dataclass(frozen=True, slots=True)
class Options:
    """The options a program accepts.

    Attributes:
        flags: Short options without an argument.
        with_arg: Short options with a required argument, attached or in the next word.
        optional_arg: Short options whose optional argument can only be attached.
        long_flags: Long options without an argument (names without the leading ``--``).
        long_with_arg: Long options with a required argument (``--name=value`` or ``--name value``).
        long_optional: Long options whose optional argument can only follow ``=``.
        numeric: Whether ``-N`` (a number) is itself an option, as in ``nice -5``.
        permute: Whether options may follow operands (GNU's default); otherwise the first operand ends them, as
            for programs that run a command (``env``, ``sudo``) whose own options must not be read as theirs.
    """

    flags: str = ""
    with_arg: str = ""
    optional_arg: str = ""
    long_flags: frozenset[str] = frozenset()
    long_with_arg: frozenset[str] = frozenset()
    long_optional: frozenset[str] = frozenset()
    numeric: bool = False
    permute: bool = False

    def long_name(self, given: str) -> str | None:
        """The long option ``given`` names, allowing an unambiguous prefix; None when unknown or ambiguous."""
        known = self.long_flags | self.long_with_arg | self.long_optional
        if given in known:
            return given
        candidates = [name for name in known if name.startswith(given)]
        return candidates[0] if given and len(candidates) == 1 else None


@dataclass(frozen=True, slots=True)
class Token:
    """One option or operand.

    Attributes:
        index: Where the word is in the scanned sequence (for an option with a separate argument, the option's).
        name: ``-x`` or ``--name`` (expanded from an abbreviation when known; as written when not); ``""`` for
            an operand.
        value: The option's argument (None without one), or the operand itself.
        problem: Why the option cannot be read (unknown, ambiguous, missing or unexpected argument), or ``""``.
    """

    index: int
    name: str
    value: str | None
    problem: str = ""


def _long(words: Sequence[str], i: int, spec: Options) -> tuple[Token, int]:
    word = words[i]
    given, eq, value = word[2:].partition("=")
    name = spec.long_name(given)
    if name is None:
        return Token(
            i, "--" + given, value if eq else None, f"{word.split('=', 1)[0]} is not an option known here"
        ), i + 1
    if name in spec.long_with_arg and not eq:
        if i + 1 >= len(words):
            return Token(i, "--" + name, None, f"--{name} needs an argument"), i + 1
        return Token(i, "--" + name, words[i + 1]), i + 2
    if name in spec.long_flags and eq:
        return Token(i, "--" + name, value, f"--{name} takes no argument"), i + 1
    return Token(i, "--" + name, value if eq else None), i + 1


def _short(words: Sequence[str], i: int, spec: Options) -> tuple[list[Token], int]:
    word = words[i]
    out: list[Token] = []
    for j in range(1, len(word)):
        letter = word[j]
        attached = word[j + 1 :]
        if letter in spec.with_arg:
            if attached:
                out.append(Token(i, "-" + letter, attached))
                return out, i + 1
            if i + 1 >= len(words):
                out.append(Token(i, "-" + letter, None, f"-{letter} needs an argument"))
                return out, i + 1
            out.append(Token(i, "-" + letter, words[i + 1]))
            return out, i + 2
        if letter in spec.optional_arg:
            out.append(Token(i, "-" + letter, attached or None))
            return out, i + 1
        if letter in spec.flags:
            out.append(Token(i, "-" + letter, None))
            continue
        out.append(Token(i, "-" + letter, None, f"-{letter} is not an option known here"))
        return out, i + 1
    return out, i + 1


def scan(words: Sequence[str], spec: Options, start: int = 0) -> Iterator[Token]:
    """Read ``words[start:]`` as options and operands.

    ``--`` ends the options and is not yielded; ``-`` alone is an operand. Without ``spec.permute`` every word
    from the first operand on is an operand. Scanning goes on after a token with a problem (a caller that must be
    sure stops there; one looking for risky options may read on).

    Args:
        words: The words after the program name (or all of them, with ``start``).
        spec: The program's options.
        start: Where to begin.

    Yields:
        One token per option (several for a cluster such as ``-abc``) and per operand, in order.
    """
    i = start
    operands_only = False
    while i < len(words):
        word = words[i]
        if operands_only or word == "-" or not word.startswith("-"):
            yield Token(i, "", word)
            i += 1
            operands_only = operands_only or not spec.permute
        elif word == "--":
            operands_only = True
            i += 1
        elif spec.numeric and _NUMERIC.fullmatch(word):
            yield Token(i, "-N", word[1:])
            i += 1
        elif word.startswith("--"):
            token, i = _long(words, i, spec)
            yield token
        else:
            tokens, i = _short(words, i, spec)
            yield from tokens
