"""Whether a sed script writes files or runs commands: ``w``/``W``, ``e``, and the ``s///w`` and ``s///e`` flags.

``allow sed *`` reads like "let it filter text", but ``sed 'w /etc/x'`` writes a file and ``sed 'e rm -rf ~'``
or ``sed 's/^/rm /e'`` runs a shell. :func:`script_risk` walks a script the way sed reads it (addresses, ``!``,
one command, its arguments) and reports the first such command. It is conservative: a command letter it does not
know, or a script it cannot read to the end, is reported too, since it cannot be shown harmless.
"""

from __future__ import annotations

__all__ = ["script_risk"]

_SIMPLE = frozenset("{}=dDgGhHlLnNpPqQxzF")
_S_FLAGS = frozenset("gpiImM0123456789 \t")
_ENDS = frozenset(";\n}")


def _delimited(script: str, i: int, delimiter: str) -> int:
    """The index just past the next unescaped ``delimiter`` from ``i``; -1 if there is none."""
    while i < len(script):
        if script[i] == "\\":
            i += 2
            continue
        if script[i] == delimiter:
            return i + 1
        i += 1
    return -1


def _two_parts(script: str, i: int) -> int:
    """Skip the two delimited parts of ``s`` or ``y`` starting at the delimiter at ``i``; -1 if unreadable."""
    if i >= len(script) or script[i] in "\\\n":
        return -1
    delimiter = script[i]
    i = _delimited(script, i + 1, delimiter)
    return _delimited(script, i, delimiter) if i >= 0 else -1


def _address(script: str, i: int) -> int:
    r"""Skip one address (``12``, ``$``, ``1~2``, ``/re/I``, ``\%re%``, ``+3``, ``~4``); -1 if it is unreadable."""
    n = len(script)
    if i < n and script[i] in "+~":
        i += 1
    start = i
    while i < n and (script[i].isdigit() or script[i] in "~$"):
        i += 1
    if i > start:
        return i
    if i < n and script[i] in "/\\":
        if script[i] == "\\":
            if i + 1 >= n:
                return -1
            i += 1
        i = _delimited(script, i + 1, script[i])
        while 0 <= i < n and script[i] in "IM":
            i += 1
    return i


def _line_end(script: str, i: int, *, continued: bool = False) -> int:
    """The index of the newline ending the argument at ``i`` (past backslash-continued lines when ``continued``)."""
    while True:
        end = script.find("\n", i)
        if end < 0:
            return len(script)
        if not (continued and end > 0 and script[end - 1] == "\\"):
            return end
        i = end + 1


def _skip_space(script: str, i: int) -> int:
    while i < len(script) and script[i] in " \t":
        i += 1
    return i


def script_risk(script: str) -> str:
    """Why a sed script could write a file or run a command, or ``""`` if it cannot.

    Args:
        script: One sed script (an ``-e`` argument or the first operand).

    Returns:
        The reason, naming the command, or ``""``.
    """
    i, n = 0, len(script)
    while i < n:
        if script[i] in " \t\n;":
            i += 1
            continue
        i = _address(script, i)
        if 0 <= i < n and script[i] == ",":
            i = _address(script, _skip_space(script, i + 1))
        if i < 0:
            return "a sed address this check cannot read"
        i = _skip_space(script, i)
        while i < n and script[i] == "!":
            i = _skip_space(script, i + 1)
        if i >= n:
            break
        command = script[i]
        i += 1
        if command in "wW":
            return f"the sed command {command!r} writes a file"
        if command == "e":
            return "the sed command 'e' runs a shell command"
        if command in "sy":
            i = _two_parts(script, i)
            if i < 0:
                return f"a sed {command!r} command this check cannot read"
            while command == "s" and i < n and script[i] not in _ENDS:
                if script[i] == "w":
                    return "the s command's 'w' flag writes a file"
                if script[i] == "e":
                    return "the s command's 'e' flag runs its result as a command"
                if script[i] not in _S_FLAGS:
                    return f"an s command flag this check does not know ({script[i]!r})"
                i += 1
        elif command in "aic":
            i = _line_end(script, i, continued=True)
        elif command in "rR#":
            i = _line_end(script, i)
        elif command in "btTv:":
            while i < n and script[i] not in ";\n":
                i += 1
        elif command in _SIMPLE:
            # q, Q, l and L take an optional number.
            while i < n and (script[i].isdigit() or script[i] in " \t"):
                i += 1
        else:
            return f"the sed command {command!r} is not one this check knows"
    return ""
