"""Programs that run another program: which one they run, read from their options, or why that cannot be known.

A deny rule for ``rm`` must see the ``rm`` in ``sudo -u root nice -n 5 /bin/rm -rf ~``. :func:`unwrap` reads one
layer: the wrapper's options (from a table written from each program's manual), then any positional words it
takes before the command (``timeout``'s duration, ``chrt``'s priority, ``taskset``'s mask) and any
``NAME=VALUE`` assignments (``env``, ``sudo``), and returns the command that is left. It does not guess: an
option it does not know, a missing argument, or an option that hands the command to a shell or reads it from
elsewhere (``env -S``, ``sudo -s``) is a *doubt*, which makes the policy ask rather than allow when a deny rule
could be in play. An option after which nothing is run (``command -v``, ``sudo -l``, ``--help``) means no command.

Unwrapped: ``env``, ``command``, ``exec``, ``builtin``, ``nice``, ``timeout``, ``sudo``, ``doas``, ``nohup``,
``stdbuf``, ``ionice``, ``setsid``, ``time``, ``chrt``, ``taskset``, ``xargs``, ``busybox``. Every other name in
:data:`~orchestrator.policy.shellwords.WRAPPERS` (the shells, ``eval``, ``su``, ``watch``, ``strace`` ...) runs
something this module cannot read and is always a doubt.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from orchestrator.policy.options import Options, scan
from orchestrator.policy.shellwords import WRAPPERS

__all__ = ["OPAQUE", "TABLE", "Unwrapped", "Wrapper", "unwrap"]

_HELP = frozenset({"help", "version"})
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


@dataclass(frozen=True, slots=True)
class Wrapper:
    """How one wrapper reads its command line.

    Attributes:
        options: Its options.
        operands: Patterns for the positional words it takes before the command, in order.
        operand_names: What those words are, for messages.
        assignments: Whether ``NAME=VALUE`` words may come before the command.
        dash_resets: Whether ``-`` alone is an option (``env -`` is ``env -i``).
        lookup: Options after which no command runs (``command -v``, ``sudo -l``, ``--help``).
        doubtful: Options after which the command cannot be read, and why.
        via_shell: Options that hand the command to a shell: still read, but with a doubt.
        appends: Why the command gets words this check cannot see (``xargs``), or ``""``.
    """

    options: Options
    operands: tuple[str, ...] = ()
    operand_names: tuple[str, ...] = ()
    assignments: bool = False
    dash_resets: bool = False
    lookup: frozenset[str] = frozenset()
    doubtful: Mapping[str, str] = field(default_factory=dict[str, str])
    via_shell: frozenset[str] = frozenset()
    appends: str = ""


@dataclass(frozen=True, slots=True)
class Unwrapped:
    """What one wrapper runs.

    Attributes:
        inner: The command it runs (program word first), or ``()`` when it runs none or it cannot be read.
        doubt: Why the command it runs cannot be known for sure, or ``""``.
        assignments: The ``NAME=VALUE`` words it passes to the command.
    """

    inner: tuple[str, ...]
    doubt: str = ""
    assignments: tuple[str, ...] = ()


def _lookups(*names: str) -> frozenset[str]:
    return frozenset(names) | {"--help", "--version"}


TABLE: Mapping[str, Wrapper] = {
    "env": Wrapper(
        Options(
            flags="i0v",
            with_arg="uCSP",
            long_flags=frozenset({"ignore-environment", "null", "debug", "list-signal-handling"}) | _HELP,
            long_with_arg=frozenset({"unset", "chdir", "split-string"}),
            long_optional=frozenset({"ignore-signal", "default-signal", "block-signal"}),
        ),
        assignments=True,
        dash_resets=True,
        lookup=_lookups("--list-signal-handling"),
        doubtful={
            "-S": "env -S splits a string into a command by its own rules",
            "--split-string": "env --split-string splits a string into a command by its own rules",
        },
    ),
    "command": Wrapper(Options(flags="pvV"), lookup=frozenset({"-v", "-V"})),
    "exec": Wrapper(Options(flags="cl", with_arg="a")),
    "builtin": Wrapper(Options()),
    "nice": Wrapper(
        Options(with_arg="n", long_with_arg=frozenset({"adjustment"}), long_flags=_HELP, numeric=True),
        lookup=_lookups(),
    ),
    "timeout": Wrapper(
        Options(
            flags="vfp",
            with_arg="sk",
            long_flags=frozenset({"foreground", "preserve-status", "verbose"}) | _HELP,
            long_with_arg=frozenset({"signal", "kill-after"}),
        ),
        operands=(r"(\d+\.?\d*|\.\d+)(e[+-]?\d+)?[smhd]?",),
        operand_names=("a duration",),
        lookup=_lookups(),
    ),
    "sudo": Wrapper(
        Options(
            flags="AbEeHhiKklLnPSsVv",
            with_arg="CDgprRTtuUc",
            long_flags=frozenset(
                {
                    "askpass",
                    "background",
                    "bell",
                    "edit",
                    "set-home",
                    "login",
                    "remove-timestamp",
                    "reset-timestamp",
                    "list",
                    "non-interactive",
                    "preserve-groups",
                    "stdin",
                    "shell",
                    "validate",
                }
            )
            | _HELP,
            long_with_arg=frozenset(
                {
                    "close-from",
                    "chdir",
                    "group",
                    "host",
                    "prompt",
                    "chroot",
                    "role",
                    "type",
                    "command-timeout",
                    "other-user",
                    "user",
                }
            ),
            long_optional=frozenset({"preserve-env"}),
        ),
        assignments=True,
        lookup=_lookups("-l", "--list", "-V", "-v", "--validate", "-K", "--remove-timestamp"),
        doubtful={
            "-e": "sudo -e edits files with an editor it chooses",
            "--edit": "sudo --edit edits files with an editor it chooses",
            "-h": "sudo -h is either --help or --host, depending on what follows",
        },
        via_shell=frozenset({"-s", "--shell", "-i", "--login"}),
    ),
    "doas": Wrapper(
        Options(flags="nsL", with_arg="auC"),
        lookup=frozenset({"-C", "-L"}),
        doubtful={"-s": "doas -s runs a shell"},
    ),
    "nohup": Wrapper(Options(long_flags=_HELP), lookup=_lookups()),
    "stdbuf": Wrapper(
        Options(with_arg="ioe", long_with_arg=frozenset({"input", "output", "error"}), long_flags=_HELP),
        lookup=_lookups(),
    ),
    "ionice": Wrapper(
        Options(
            flags="thV",
            with_arg="cnpPu",
            long_flags=frozenset({"ignore"}) | _HELP,
            long_with_arg=frozenset({"class", "classdata", "pid", "pgid", "uid"}),
        ),
        lookup=_lookups("-p", "--pid", "-P", "--pgid", "-u", "--uid", "-h", "-V"),
    ),
    "setsid": Wrapper(
        Options(flags="cfwhV", long_flags=frozenset({"ctty", "fork", "wait"}) | _HELP),
        lookup=_lookups("-h", "-V"),
    ),
    "time": Wrapper(
        Options(
            flags="apqvV",
            with_arg="fo",
            long_flags=frozenset({"append", "portability", "quiet", "verbose"}) | _HELP,
            long_with_arg=frozenset({"format", "output"}),
        ),
        lookup=_lookups("-V"),
    ),
    "chrt": Wrapper(
        Options(
            flags="abdefimoprRvhV",
            with_arg="TPD",
            long_flags=frozenset(
                {"all-tasks", "batch", "deadline", "ext", "fifo", "idle", "max", "other", "pid", "rr"}
                | {"reset-on-fork", "verbose"}
            )
            | _HELP,
            long_with_arg=frozenset({"sched-runtime", "sched-period", "sched-deadline"}),
        ),
        operands=(r"\d+",),
        operand_names=("a priority",),
        lookup=_lookups("-m", "--max", "-p", "--pid", "-h", "-V"),
    ),
    "taskset": Wrapper(
        Options(flags="acphV", long_flags=frozenset({"all-tasks", "cpu-list", "pid"}) | _HELP),
        operands=(r"[0-9a-fA-Fx,:\-]+",),
        operand_names=("a CPU mask or list",),
        lookup=_lookups("-p", "--pid", "-h", "-V"),
    ),
    "xargs": Wrapper(
        Options(
            flags="0oprtx",
            with_arg="adEILnPsJRS",
            optional_arg="eil",
            long_flags=frozenset({"null", "interactive", "no-run-if-empty", "show-limits", "verbose", "exit"})
            | {"open-tty"}
            | _HELP,
            long_with_arg=frozenset(
                {"arg-file", "delimiter", "max-args", "max-procs", "max-chars", "process-slot-var"}
            ),
            long_optional=frozenset({"eof", "replace", "max-lines"}),
        ),
        lookup=_lookups("--show-limits"),
        appends="xargs adds arguments it reads from its input",
    ),
    "busybox": Wrapper(Options()),
}

# Names that run a command this module cannot read: always a doubt.
OPAQUE = frozenset(WRAPPERS - TABLE.keys())


def unwrap(name: str, args: Sequence[str]) -> Unwrapped:
    """The command the wrapper ``name`` runs, given the words after its own name.

    Args:
        name: A key of :data:`TABLE`.
        args: The words after the wrapper's program word.

    Returns:
        The command it runs and any doubt about it.
    """
    spec = TABLE[name]
    if name == "busybox" and args and args[0].startswith("-"):
        return Unwrapped((), f"busybox {args[0]} is not an applet this check can read")
    first = len(args)
    shell = ""
    for token in scan(args, spec.options):
        if token.problem:
            return Unwrapped((), f"{name}: {token.problem}, so the command it runs cannot be known for sure")
        if not token.name:
            first = token.index
            break
        if token.name in spec.lookup:
            return Unwrapped(())
        if token.name in spec.doubtful:
            return Unwrapped((), spec.doubtful[token.name])
        if token.name in spec.via_shell:
            shell = f"{name} {token.name} runs the command through a shell"
    rest = tuple(args[first:])
    if spec.dash_resets and rest[:1] == ("-",):
        rest = rest[1:]
    for pattern, what in zip(spec.operands, spec.operand_names, strict=True):
        if not rest:
            return Unwrapped((), shell)
        if not re.fullmatch(pattern, rest[0], re.IGNORECASE):
            return Unwrapped((), f"{name} expects {what} before the command, not {rest[0]!r}")
        rest = rest[1:]
    assignments: tuple[str, ...] = ()
    if spec.assignments:
        count = next((i for i, word in enumerate(rest) if not _ASSIGNMENT.match(word)), len(rest))
        assignments, rest = rest[:count], rest[count:]
    doubt = shell or (spec.appends if rest else "")
    return Unwrapped(rest, doubt, assignments)
