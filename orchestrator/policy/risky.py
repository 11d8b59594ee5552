"""Forms of otherwise harmless commands that write files or run programs, which an allow rule must not admit.

``allow find *`` reads as "let it look for files", yet ``find . -delete`` deletes them and ``find . -exec rm {} +``
runs ``rm``; ``allow git log *`` admits ``git log --output=~/.bashrc``. :func:`findings` lists such words in a plain
command; an allow rule whose pattern does not spell the word out itself (``allow sed -i *`` does) does not match,
so the call falls through to the mode's default, which asks. Deny and ask rules are unaffected.

=================  ===========================================================================================
program            forms an allow rule does not admit (unless its pattern spells the word out)
=================  ===========================================================================================
find               ``-delete -exec -execdir -ok -okdir -fprint -fprint0 -fprintf -fls``
fd, fdfind         ``-x --exec -X --exec-batch``
git                any global option before the subcommand but ``-P --no-pager -p --paginate --namespace``
                   ``--no-replace-objects --no-lazy-fetch --no-optional-locks --no-advice --*-pathspecs``
                   (``-c``, ``--config-env``, ``-C``, ``--git-dir``, ``--work-tree``, ``--bare``, ``--exec-path``
                   can point git at configuration that runs programs: ``core.pager``, ``core.sshCommand`` ...);
                   after it ``--output``, ``--output-directory``, ``--ext-diff``, ``--upload-pack``,
                   ``--receive-pack``, ``--exec`` (and their abbreviations), ``-o`` for ``format-patch`` and
                   ``archive``, ``-O``/``--open-files-in-pager`` for ``grep``
sort               ``-o``, ``--output``, ``--compress-program``
sed                ``-i``/``--in-place``, ``-f``/``--file`` (a script this check cannot see), and scripts with
                   ``w``, ``W``, ``e`` or an ``s`` command's ``w``/``e`` flag (:mod:`~orchestrator.policy.sedscript`)
awk, gawk, mawk,   ``-f``/``--file``, ``-E``/``--exec``, ``-i``/``--include``, ``-l``/``--load``, ``-W``,
nawk               ``-o``/``-p``/``-d`` (gawk writes a file), and programs containing ``system``, ``|``, ``@``,
                   or a ``>`` other than ``>=`` or ``> NUMBER`` (output redirection; awk is not parsed, so a
                   comparison with a variable counts too)
tee                every file operand (tee writes it)
uniq               a second operand (the output file)
xargs              always (it runs the command it is given; wrappers are never allowed by a rule anyway)
rg                 ``--pre`` (runs a program on every file)
tar                ``-I``, ``-F``, ``--to-command``, ``--use-compress-program``, ``--checkpoint-action``,
                   ``--info-script``, ``--new-volume-script``, ``--rsh-command``, ``--rmt-command``
curl               ``-o -O -D -c -K``, ``--output``, ``--remote-name(-all)``, ``--dump-header``, ``--cookie-jar``,
                   ``--config``, ``--trace(-ascii)``, ``--libcurl``, ``--stderr``, ``--etag-save``, ``--hsts``,
                   ``--alt-svc``
=================  ===========================================================================================

Long options are matched with any abbreviation (``--outp``), as GNU tools accept them. The table is about
*known* forms; it is not a proof that anything else is harmless, which is why shell commands are never allowed by
default.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from orchestrator.policy.gitargs import INERT_OPTIONS, read_git
from orchestrator.policy.options import Options, scan
from orchestrator.policy.programs import program_name
from orchestrator.policy.sedscript import script_risk

__all__ = ["Finding", "findings"]


@dataclass(frozen=True, slots=True)
class Finding:
    """One word that makes a plain command write files or run programs.

    Attributes:
        index: The word's position in the command.
        reason: What it does, in words for a person.
    """

    index: int
    reason: str


def _long_hit(word: str, names: Mapping[str, str]) -> str:
    """The reason for a long option that is, or abbreviates, one of ``names``; ``""`` otherwise."""
    if not word.startswith("--") or word == "--":
        return ""
    given = word[2:].split("=", 1)[0]
    return next((why for name, why in names.items() if given and name.startswith(given)), "")


def _short_hit(word: str, letters: Mapping[str, str]) -> str:
    """The reason for a short-option cluster holding one of ``letters`` anywhere (conservatively); ``""`` else."""
    if not word.startswith("-") or word.startswith("--") or word == "-":
        return ""
    return next((why for letter, why in letters.items() if letter in word[1:]), "")


def _options_until_end(words: Sequence[str], start: int = 1) -> Sequence[tuple[int, str]]:
    end = next((i for i in range(start, len(words)) if words[i] == "--"), len(words))
    return [(i, words[i]) for i in range(start, end)]


def _simple(
    long: Mapping[str, str], short: Mapping[str, str] | None = None
) -> Callable[[Sequence[str]], list[Finding]]:
    def check(words: Sequence[str]) -> list[Finding]:
        out = []
        for i, word in _options_until_end(words):
            why = _long_hit(word, long) or _short_hit(word, short or {})
            if why:
                out.append(Finding(i, why))
        return out

    return check


_FIND = {
    "-delete": "deletes what it finds",
    "-exec": "runs a command",
    "-execdir": "runs a command",
    "-ok": "runs a command",
    "-okdir": "runs a command",
    "-fprint": "writes a file",
    "-fprint0": "writes a file",
    "-fprintf": "writes a file",
    "-fls": "writes a file",
}


def _find(words: Sequence[str]) -> list[Finding]:
    return [Finding(i, f"find {word} {_FIND[word]}") for i, word in enumerate(words) if word in _FIND]


_GIT_LONG = {
    "output": "git --output writes a file",
    "output-directory": "git --output-directory writes files",
    "ext-diff": "git --ext-diff runs the configured diff program",
    "upload-pack": "git --upload-pack runs a program",
    "receive-pack": "git --receive-pack runs a program",
    "exec": "git --exec runs a program",
    "open-files-in-pager": "git grep --open-files-in-pager runs a program",
}
_GIT_SHORT = {
    "format-patch": {"o": "git format-patch -o writes files"},
    "archive": {"o": "git archive -o writes a file"},
    "grep": {"O": "git grep -O runs a program"},
}


def _git(words: Sequence[str]) -> list[Finding]:
    git = read_git(words)
    out = [
        Finding(i, f"git {option} before the subcommand can point git at configuration that runs programs")
        for i, option in git.options
        if option not in INERT_OPTIONS
    ]
    if git.subcommand is None:
        return out
    short = _GIT_SHORT.get(words[git.subcommand], {})
    for i, word in _options_until_end(words, git.subcommand + 1):
        why = _long_hit(word, _GIT_LONG) or _short_hit(word, short)
        if why:
            out.append(Finding(i, why))
    return out


def _risky_options(
    spec: Options, names: Mapping[str, str]
) -> Callable[[Sequence[str]], tuple[list[Finding], list[tuple[int, str]]]]:
    """A check that reads options by ``spec`` and reports those in ``names``; also returns the operands."""

    def check(words: Sequence[str]) -> tuple[list[Finding], list[tuple[int, str]]]:
        out: list[Finding] = []
        operands: list[tuple[int, str]] = []
        for token in scan(words, spec, start=1):
            if not token.name:
                operands.append((token.index, token.value or ""))
            elif token.name in names:
                out.append(Finding(token.index, names[token.name]))
            elif token.name.startswith("--") and (why := _long_hit(token.name, {n[2:]: w for n, w in names.items()})):
                out.append(Finding(token.index, why))
        return out, operands

    return check


_SORT = _risky_options(
    Options(
        flags="bcCdfghiMmnRrsuVz",
        with_arg="kotST",
        long_with_arg=frozenset({"key", "output", "field-separator", "buffer-size", "temporary-directory"})
        | {"compress-program", "batch-size", "files0-from", "parallel", "random-source", "sort"},
        permute=True,
    ),
    {
        "-o": "sort -o writes a file",
        "--output": "sort --output writes a file",
        "--compress-program": "sort --compress-program runs a program",
    },
)

_SED_OPTIONS = Options(
    flags="nrEsuz",
    with_arg="efl",
    optional_arg="i",
    long_flags=frozenset({"quiet", "silent", "debug", "posix", "regexp-extended", "separate", "sandbox"})
    | {"unbuffered", "null-data", "zero-terminated", "follow-symlinks", "binary"},
    long_with_arg=frozenset({"expression", "file", "line-length"}),
    long_optional=frozenset({"in-place"}),
    permute=True,
)
_SED_NAMES = {
    "-i": "sed -i edits files in place",
    "--in-place": "sed --in-place edits files in place",
    "-f": "sed -f reads a script this check cannot see",
    "--file": "sed --file reads a script this check cannot see",
}


def _sed(words: Sequence[str]) -> list[Finding]:
    out, operands = _risky_options(_SED_OPTIONS, _SED_NAMES)(words)
    tokens = list(scan(words, _SED_OPTIONS, 1))
    scripts = [(t.index, t.value or "") for t in tokens if t.name in ("-e", "--expression")]
    if not scripts and not any(t.name in ("-f", "--file") for t in tokens):
        scripts = operands[:1]
    out.extend(Finding(i, why) for i, script in scripts if (why := script_risk(script)))
    return out


_AWK_OPTIONS = Options(
    flags="bcCghMnNOPrsStVyY",
    with_arg="FvfeilEW",
    optional_arg="dDLop",
    long_with_arg=frozenset({"field-separator", "assign", "file", "source", "include", "load", "exec"}),
    long_optional=frozenset({"dump-variables", "debug", "lint", "pretty-print", "profile"}),
)
_AWK_NAMES = {
    "-f": "awk -f reads a program this check cannot see",
    "--file": "awk --file reads a program this check cannot see",
    "-E": "awk -E reads a program this check cannot see",
    "--exec": "awk --exec reads a program this check cannot see",
    "-i": "awk -i loads a source file",
    "--include": "awk --include loads a source file",
    "-l": "awk -l loads a shared library",
    "--load": "awk --load loads a shared library",
    "-W": "mawk -W options are not read by this check",
    "-o": "gawk -o writes a file",
    "--pretty-print": "gawk --pretty-print writes a file",
    "-p": "gawk -p writes a profile file",
    "--profile": "gawk --profile writes a profile file",
    "-d": "gawk -d writes a file",
    "--dump-variables": "gawk --dump-variables writes a file",
}
# Options that name the program's file, so that no operand is the program text.
_AWK_PROGRAM_FILES = frozenset({"-f", "--file", "-E", "--exec"})
# A '>' that is not '>=' and not a comparison with a number: output redirection, as far as can be told unparsed.
_AWK_REDIRECT = re.compile(r">(?!=)(?!\s*\d)")


def _awk_program_risk(program: str) -> str:
    if "system" in program:
        return "the awk program calls system()"
    if "|" in program:
        return "the awk program pipes to or from a command"
    if "@" in program:
        return "the awk program loads code (@load, @include)"
    if _AWK_REDIRECT.search(program):
        return "the awk program may redirect output to a file (>)"
    return ""


def _awk(words: Sequence[str]) -> list[Finding]:
    out, operands = _risky_options(_AWK_OPTIONS, _AWK_NAMES)(words)
    tokens = list(scan(words, _AWK_OPTIONS, 1))
    programs = [(t.index, t.value or "") for t in tokens if t.name in ("-e", "--source")]
    if not programs and not any(t.name in _AWK_PROGRAM_FILES for t in tokens):
        programs = operands[:1]
    out.extend(Finding(i, why) for i, program in programs if (why := _awk_program_risk(program)))
    return out


_TEE_OPTIONS = Options(
    flags="aip",
    long_flags=frozenset({"append", "ignore-interrupts"}),
    long_optional=frozenset({"output-error"}),
    permute=True,
)


def _tee(words: Sequence[str]) -> list[Finding]:
    _, operands = _risky_options(_TEE_OPTIONS, {})(words)
    return [Finding(i, f"tee writes {word!r}") for i, word in operands]


_UNIQ_OPTIONS = Options(
    flags="cdDiuz",
    with_arg="fsw",
    long_flags=frozenset({"count", "repeated", "ignore-case", "unique", "zero-terminated"}),
    long_with_arg=frozenset({"skip-fields", "skip-chars", "check-chars"}),
    long_optional=frozenset({"all-repeated", "group"}),
    permute=True,
)


def _uniq(words: Sequence[str]) -> list[Finding]:
    _, operands = _risky_options(_UNIQ_OPTIONS, {})(words)
    return [Finding(i, f"uniq writes its output to {word!r}") for i, word in operands[1:2]]


def _xargs(words: Sequence[str]) -> list[Finding]:
    return [Finding(0, "xargs runs the command it is given")]


def _rg(words: Sequence[str]) -> list[Finding]:
    return [
        Finding(i, "rg --pre runs a program on every file")
        for i, word in _options_until_end(words)
        if word.split("=", 1)[0] == "--pre"
    ]


_TAR_LONG = {
    name: f"tar --{name} runs a program"
    for name in ("to-command", "use-compress-program", "checkpoint-action", "info-script", "new-volume-script")
    + ("rsh-command", "rmt-command")
}
_TAR_SHORT = {"I": "tar -I runs a program", "F": "tar -F runs a program"}


def _tar(words: Sequence[str]) -> list[Finding]:
    out = _simple(_TAR_LONG, _TAR_SHORT)(words)
    # Old-style options: the first argument's letters without a dash ("tar cIf ...").
    if len(words) > 1 and not words[1].startswith("-") and (why := _short_hit("-" + words[1], _TAR_SHORT)):
        out.append(Finding(1, why))
    return out


_CURL_LONG = {
    name: f"curl --{name} writes a file"
    for name in ("output", "remote-name", "remote-name-all", "dump-header", "cookie-jar", "trace", "trace-ascii")
    + ("libcurl", "stderr", "etag-save", "hsts", "alt-svc")
} | {"config": "curl --config reads options this check cannot see"}
_CURL_SHORT = {
    "o": "curl -o writes a file",
    "O": "curl -O writes a file",
    "D": "curl -D writes a file",
    "c": "curl -c writes a file",
    "K": "curl -K reads options this check cannot see",
}

_TABLE: Mapping[str, Callable[[Sequence[str]], list[Finding]]] = {
    "find": _find,
    "fd": _simple(
        {"exec": "fd --exec runs a command", "exec-batch": "fd --exec-batch runs a command"},
        {"x": "fd -x runs a command", "X": "fd -X runs a command"},
    ),
    "git": _git,
    "sort": lambda words: _SORT(words)[0],
    "sed": _sed,
    "awk": _awk,
    "tee": _tee,
    "uniq": _uniq,
    "xargs": _xargs,
    "rg": _rg,
    "tar": _tar,
    "curl": _simple(_CURL_LONG, _CURL_SHORT),
}
_ALIASES = {"fdfind": "fd", "gawk": "awk", "mawk": "awk", "nawk": "awk", "gsed": "sed", "gfind": "find"}


def findings(words: Sequence[str]) -> list[Finding]:
    """The words of a plain command that make it write files or run programs beyond what its name suggests.

    Args:
        words: The command's words after quote removal, program word first.

    Returns:
        One finding per such word, in order; empty for a command with none.
    """
    if not words:
        return []
    name = program_name(words[0]).casefold()
    check = _TABLE.get(_ALIASES.get(name, name))
    return check(words) if check is not None else []
