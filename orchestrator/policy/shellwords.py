"""Conservative parsing of a shell command line into simple commands.

An allow rule such as ``git status`` must never admit ``git status; rm -rf ~``, ``$(...)`` or a redirection, so
this parser does not try to understand the shell: it recognises the one shape it can vouch for — a plain list of
words separated by whitespace, with ordinary quoting — and calls everything else *complex*. A complex command line
is never matched by an allow rule; it can only be denied or asked about. Being wrong in the direction of
"complex" costs a question to a person; being wrong the other way runs a command nobody approved.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

__all__ = ["CommandLine", "SimpleCommand", "parse"]

# Characters shlex turns into separate tokens. "\n" is one of them (and removed from whitespace) so that a newline
# separates commands here just as it does in the shell.
_PUNCTUATION = "();<>|&\n"
_SEPARATOR_CHARS = frozenset(";&|\n")
_KNOWN_SEPARATORS = frozenset({";", "&&", "||", "|", "&", "|&"})

# Anything that makes the shell do more than run the words as they stand: expansion ($, backtick), comments (the
# shell and shlex disagree about "a#b"), grouping and brace expansion, history expansion, line continuation.
_RAW_COMPLEX = (
    ("$", "parameter, command or arithmetic expansion ($)"),
    ("`", "command substitution (backtick)"),
    ("#", "a comment (#)"),
    ("{", "a brace group or brace expansion ({)"),
    ("}", "a brace group or brace expansion (})"),
    ("!", "history expansion or negation (!)"),
    ("\\\n", "a line continuation"),
    ("\\\r", "a line continuation"),
)

# Printable ASCII plus space, tab and newline. Anything else (unicode look-alikes of ';' or '|', control
# characters, NUL, carriage returns) is refused rather than guessed at.
_PLAIN = re.compile(r"[\x20-\x7e\t\n]*")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")
# Metacharacters that, even quoted inside a word, make the command worth a person's look: a quoted "; rm" is
# harmless to the shell but is exactly the kind of argument a prefix rule should not wave through.
_WORD_META = re.compile(r"[;&|<>()$`\n\r\\]")

# Commands that run other commands (or change how the rest of the line is read). Matching "git status" against
# "sudo git status" or "sh -c 'git status; rm -rf ~'" would be matching the wrong program.
WRAPPERS = frozenset(
    {
        "sh",
        "bash",
        "zsh",
        "dash",
        "ksh",
        "mksh",
        "fish",
        "csh",
        "tcsh",
        "busybox",
        "eval",
        "exec",
        "env",
        "xargs",
        "sudo",
        "doas",
        "su",
        "nohup",
        "setsid",
        "time",
        "nice",
        "ionice",
        "timeout",
        "stdbuf",
        "watch",
        "command",
        "builtin",
        "source",
        ".",
        "alias",
        "function",
        "trap",
        "coproc",
        # Not shell syntax, but programs whose job is to run the command that follows them.
        "chrt",
        "taskset",
        "pkexec",
        "runuser",
        "sg",
        "chroot",
        "flock",
        "unshare",
        "nsenter",
        "strace",
        "ltrace",
        "faketime",
        "firejail",
        "systemd-run",
        "unbuffer",
        "rlwrap",
        "script",
        "parallel",
    }
)


@dataclass(frozen=True, slots=True)
class SimpleCommand:
    """One command of a command line: its words after quote removal."""

    words: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CommandLine:
    """A parsed command line.

    Attributes:
        commands: The simple commands that could be recognised, in order (best effort when complex).
        separators: The list operators found between them (``;``, ``&&``, ``|``, newline, ...).
        complex_reason: Why the line is complex, or ``""`` if it is a single plain command.
        line_reason: Why the line is more than one command whose words say all it runs (expansions,
            redirections, lists, a character outside printable ASCII ...), or ``""``. A line complex only because of
            its command's own words (a wrapper such as ``sudo``, an ``A=1`` prefix, a quoted ``;``) has none: what
            it runs can still be read from those words, which is what deny rules need.
    """

    commands: tuple[SimpleCommand, ...]
    separators: tuple[str, ...]
    complex_reason: str
    line_reason: str = ""

    @property
    def is_simple(self) -> bool:
        """True when the line is exactly one plain command, the only shape an allow rule may match."""
        return not self.complex_reason and len(self.commands) == 1 and not self.separators


def _tokens(line: str) -> list[str]:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=_PUNCTUATION)
    lexer.whitespace = " \t"
    lexer.whitespace_split = True
    # The shell's idea of a comment differs from shlex's; '#' is refused before lexing instead.
    lexer.commenters = ""
    return list(lexer)


def _command_reason(words: tuple[str, ...]) -> str:
    if _ASSIGNMENT.match(words[0]):
        return f"an environment assignment prefix ({words[0]!r})"
    program = words[0].rsplit("/", 1)[-1]
    # Case-insensitive filesystems (macOS) run "SUDO" as sudo.
    if program.casefold() in WRAPPERS:
        return f"{program!r} runs or changes other commands"
    for word in words:
        if _WORD_META.search(word):
            return f"a shell metacharacter inside the word {word!r}"
    return ""


def parse(line: str) -> CommandLine:
    """Split a shell command line into simple commands, conservatively.

    Args:
        line: The command line as the shell would receive it.

    Returns:
        The recognised commands and separators, and why the line is complex (``""`` when it is one plain
        command that an allow rule may match).
    """
    reasons: list[str] = []
    if not _PLAIN.fullmatch(line):
        bad = next(ch for ch in line if not _PLAIN.fullmatch(ch))
        reasons.append(f"a character outside printable ASCII ({bad!r})")
    reasons.extend(why for needle, why in _RAW_COMPLEX if needle in line)
    try:
        tokens = _tokens(line)
    except ValueError as exc:  # shlex: "No closing quotation" / "No escaped character"
        return CommandLine((), (), f"it cannot be parsed ({exc})", f"it cannot be parsed ({exc})")

    commands: list[SimpleCommand] = []
    separators: list[str] = []
    current: list[str] = []
    # shlex does not say which tokens were punctuation, so a quoted ";" looks like a real one. Both are treated as
    # separators; the quoted case is harmless to the shell and merely makes the line "complex" here.
    for token in tokens:
        if token and all(ch in _PUNCTUATION for ch in token):
            if set(token) <= _SEPARATOR_CHARS:
                separator = token.strip("\n") or "\n"
                if "\n" in token and separator != "\n":
                    separators.append("\n")
                if separator not in _KNOWN_SEPARATORS and separator != "\n":
                    reasons.append(f"an unusual operator ({token!r})")
                separators.append(separator)
            elif "(" in token or ")" in token:
                reasons.append(f"a subshell, function or process substitution ({token!r})")
            else:
                reasons.append(f"a redirection or here-document ({token!r})")
            if current:
                commands.append(SimpleCommand(tuple(current)))
                current = []
            continue
        current.append(token)
    if current:
        commands.append(SimpleCommand(tuple(current)))

    # Everything found so far is about the line as a whole; what follows is about one command's words.
    line_reasons = list(reasons)
    command_reasons = [why for command in commands if (why := _command_reason(command.words))]
    if not commands:
        line_reasons.append("it has no command")
    elif len(commands) > 1 or separators:
        line_reasons.append("it is more than one command")
    reasons = [*reasons, *command_reasons, *line_reasons[len(reasons) :]]
    # Several findings usually describe one problem; the first is the clearest to show a person.
    return CommandLine(
        tuple(commands), tuple(separators), reasons[0] if reasons else "", line_reasons[0] if line_reasons else ""
    )
