"""The paths a tool call names, resolved the way the policy compares them, and the ones that cannot be resolved.

Path rules, the accept-edits workspace check and the protected-path check compare *resolved* paths: relative to
the session's working directory, ``~`` expanded, symlinks and ``..`` resolved. Resolving can fail: a NUL byte
(``ValueError``), a chain of symlinks deeper than Python's recursion limit (``RecursionError``, a
``RuntimeError``), a working directory that was deleted (``FileNotFoundError`` from ``getcwd``), a link that
changes while it is read (``OSError``). A path that cannot be resolved names nothing a rule can vouch for: it is
kept, with the reason, as *unresolved*, and the policy asks about the call rather than crash on it or guess.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["PATH_KEYS", "ArgumentPaths", "argument_paths", "path_arguments", "realpath"]

# Argument names that carry a path for file tools. A tool with other path-like arguments is matched on these only,
# so an allow rule with a path needs at least one of them to match at all.
PATH_KEYS = frozenset({"path", "paths", "source", "destination", "src", "dst", "file", "files", "directory", "dir"})


@dataclass(frozen=True, slots=True)
class ArgumentPaths:
    """The paths among a call's arguments.

    Attributes:
        resolved: The paths that could be resolved.
        unresolved: ``(path as given, why it cannot be resolved)`` for the others.
    """

    resolved: tuple[str, ...] = ()
    unresolved: tuple[tuple[str, str], ...] = ()


def realpath(path: str) -> str:
    """``os.path.realpath``, with every way it can fail raised as ``OSError`` carrying the reason.

    Raises:
        OSError: The path cannot be resolved (its message says why).
    """
    try:
        return os.path.realpath(path)
    except (OSError, RuntimeError, ValueError) as exc:
        # RecursionError's own message is long and says nothing about paths.
        why = "too many symbolic links" if isinstance(exc, RecursionError) else str(exc) or type(exc).__name__
        raise OSError(why) from None


def resolve(raw: str, cwd: str) -> str:
    """Resolve one path as the policy compares it: relative to ``cwd``, ``~`` expanded, symlinks resolved.

    Raises:
        OSError: It cannot be resolved.
    """
    return realpath(os.path.join(cwd, os.path.expanduser(raw)))


def argument_paths(arguments: Mapping[str, Any], cwd: str) -> ArgumentPaths:
    """The paths a file tool's arguments name, resolved where they can be.

    Args:
        arguments: The call's arguments; keys in :data:`PATH_KEYS` or ending in ``_path`` carry paths (a string
            or a list of strings).
        cwd: The session's working directory.

    Returns:
        The resolved paths and the unresolved ones with their reasons.
    """
    raw: list[str] = []
    for key, value in arguments.items():
        values = value if isinstance(value, list) else [value]
        if key in PATH_KEYS or key.endswith("_path"):
            raw.extend(v for v in values if isinstance(v, str))
    resolved: list[str] = []
    unresolved: list[tuple[str, str]] = []
    for path in raw:
        try:
            resolved.append(resolve(path, cwd))
        except OSError as exc:
            unresolved.append((path, str(exc)))
    return ArgumentPaths(tuple(resolved), tuple(unresolved))


def path_arguments(arguments: Mapping[str, Any], cwd: str) -> list[str]:
    """The paths among a file tool's arguments: resolved, or as given where they cannot be resolved."""
    paths = argument_paths(arguments, cwd)
    return [*paths.resolved, *(raw for raw, _ in paths.unresolved)]
