"""Confinement of model-supplied paths to the fs server's allowed roots.

Every tool funnels its ``path`` argument through `Roots.resolve` before touching the disk. Relative paths are
taken against the first (primary) root; symlinks are resolved before the containment check, so a link inside a
root that points outside it is refused like ``..`` would be. For a path that does not exist yet, the existing
part of the parent chain is resolved and the rest is appended, which is what `Path.resolve` does when not strict.

There is an unavoidable window between the check and the open in which another process could swap a directory
for a symlink; the server guards against the model, not against a hostile local user.
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Sequence
from pathlib import Path

from mcp.server.mcpserver.exceptions import ToolError

__all__ = ["MAX_COMPONENT_BYTES", "MAX_PATH_CHARS", "Roots", "shorten"]

MAX_PATH_CHARS = 4096
"""Longest path accepted, matching Linux ``PATH_MAX``."""

MAX_COMPONENT_BYTES = 255
"""Longest single file name accepted, matching Linux ``NAME_MAX``."""


def shorten(text: str, limit: int = 80) -> str:
    """Quote user-supplied text for an error message, eliding the middle of long values.

    Args:
        text: The text to quote.
        limit: Longest quoted value before the middle is elided.

    Returns:
        The text as a Python ``repr`` (so control characters stay visible), shortened if needed.
    """
    if len(text) > limit:
        half = limit // 2
        text = f"{text[:half]}…{text[-half:]}"
    return repr(text)


class Roots:
    """The directories the fs server may touch, and the rules for mapping user paths onto them.

    Args:
        roots: Existing directories. The first one is the primary root: relative paths resolve against it and
            reported paths are made relative to it.

    Raises:
        ValueError: If no root is given or a root is not an existing directory.
    """

    def __init__(self, roots: Sequence[Path]) -> None:
        if not roots:
            raise ValueError("at least one root directory is required")
        resolved: list[Path] = []
        for root in roots:
            path = Path(root).expanduser().resolve()
            if not path.is_dir():
                raise ValueError(f"root {str(root)!r} is not an existing directory")
            resolved.append(path)
        # dict.fromkeys drops duplicates while keeping the caller's order, so the primary root stays first.
        self._roots = tuple(dict.fromkeys(resolved))

    @property
    def primary(self) -> Path:
        """The root that relative paths resolve against."""
        return self._roots[0]

    @property
    def all(self) -> tuple[Path, ...]:
        """Every allowed root, resolved, primary first."""
        return self._roots

    def contains(self, path: Path) -> bool:
        """Whether an already-resolved path lies inside (or is) one of the roots.

        Args:
            path: An absolute path with symlinks already resolved.

        Returns:
            True if the path is inside a root.
        """
        return any(path.is_relative_to(root) for root in self._roots)

    def resolve(self, raw: str) -> Path:
        """Map a model-supplied path to an absolute, symlink-free path inside the roots.

        Args:
            raw: The path as the model sent it, absolute or relative to the primary root.

        Returns:
            The resolved path. It may not exist yet.

        Raises:
            ToolError: If the path is malformed, cannot be resolved, or lands outside every root.
        """
        _check_syntax(raw)
        candidate = Path(raw)
        if not candidate.is_absolute():
            candidate = self.primary / candidate
        try:
            resolved = candidate.resolve()
        except RuntimeError as exc:
            # Python 3.11 reports a symlink loop as RuntimeError even in non-strict mode.
            raise ToolError(f"path {shorten(raw)} cannot be resolved: {exc}") from exc
        except OSError as exc:
            raise ToolError(f"path {shorten(raw)} cannot be resolved: {exc.strerror or exc}") from exc
        if not self.contains(resolved):
            allowed = ", ".join(str(root) for root in self._roots)
            hint = "" if str(resolved) == os.path.normpath(candidate) else f" (it resolves to {resolved})"
            raise ToolError(
                f"path {shorten(raw)} resolves outside the allowed roots ({allowed}){hint}; use a path inside them"
            )
        return resolved

    def display(self, path: Path) -> str:
        """Render a resolved path for a result or message.

        Paths inside the primary root are shown relative to it (``"."`` for the root itself), since relative input
        resolves against the primary root and the model can pass them straight back. Paths in other roots are shown
        absolute for the same reason: relative to their own root they would not round-trip.

        Args:
            path: An absolute path, normally one returned by `resolve`.

        Returns:
            The path as a POSIX string.
        """
        if path.is_relative_to(self.primary):
            return path.relative_to(self.primary).as_posix()
        return path.as_posix()


def _check_syntax(raw: str) -> None:
    """Reject paths no file system would accept, before they reach one, with a message saying how to fix them."""
    if not raw or not raw.strip():
        raise ToolError("path is empty; pass a file or directory path ('.' means the root directory)")
    if "\x00" in raw:
        raise ToolError(f"path {shorten(raw)} contains a NUL byte, which no file name can contain; remove it")
    if len(raw) > MAX_PATH_CHARS:
        raise ToolError(f"path is {len(raw)} characters long; the limit is {MAX_PATH_CHARS}")
    try:
        encoded = os.fsencode(raw)
    except UnicodeError as exc:
        raise ToolError(f"path {shorten(raw)} contains characters that cannot be encoded as a file name") from exc
    for part in encoded.split(b"/"):
        if len(part) > MAX_COMPONENT_BYTES:
            name = os.fsdecode(part)
            raise ToolError(
                f"path component {shorten(name)} is {len(part)} bytes; file names are limited to "
                f"{MAX_COMPONENT_BYTES} bytes"
            )
    _check_look_alikes(raw)


# Characters that render like "." or "/" without being them. NFKC folds some (fullwidth) but not all.
_LOOK_ALIKES = {
    "\uff0e": "FULLWIDTH FULL STOP",
    "\uff0f": "FULLWIDTH SOLIDUS",
    "\u2024": "ONE DOT LEADER",
    "\u2025": "TWO DOT LEADER",
    "\u2026": "HORIZONTAL ELLIPSIS",
    "\ufe52": "SMALL FULL STOP",
    "\u2215": "DIVISION SLASH",
    "\u2044": "FRACTION SLASH",
    "\u29f8": "BIG SOLIDUS",
    "\u2571": "BOX DRAWINGS LIGHT DIAGONAL",
}
_PERCENT_ESCAPES = ("%2e", "%2f", "%5c", "%25")


def _check_look_alikes(raw: str) -> None:
    """Refuse paths whose meaning depends on an expansion or a look-alike character the server does not apply.

    None of these could leave the root (they would be literal names), but each almost certainly means
    something else to the model than the file it would create: ``~/x`` meant the home directory, and a
    backslash path or ``%2e%2e/x`` meant the parent. Refusing says so, instead of littering the workspace
    with directories named ``~``.
    """
    fix = "; pass a plain path inside the workspace"
    if raw.startswith("~"):
        raise ToolError(f"path {shorten(raw)} starts with '~', which is not expanded here{fix}")
    if raw.startswith("$"):
        raise ToolError(f"path {shorten(raw)} starts with '$': environment variables are not expanded here{fix}")
    if "://" in raw:
        raise ToolError(f"path {shorten(raw)} looks like a URL{fix}")
    if "\\" in raw:
        raise ToolError(f"path {shorten(raw)} contains a backslash, which is not a path separator here; use '/'")
    lowered = raw.lower()
    if any(escape in lowered for escape in _PERCENT_ESCAPES):
        raise ToolError(f"path {shorten(raw)} is percent-encoded, and nothing decodes it here{fix}")
    for char in raw:
        if char in _LOOK_ALIKES:
            raise ToolError(
                f"path {shorten(raw)} contains U+{ord(char):04X} {_LOOK_ALIKES[char]}, which looks like '.' or '/' "
                f"but is not{fix}"
            )
    for part in raw.split("/"):
        # A component that is dots once invisible, combining or space characters are dropped: '..\u200b', ' ..'
        visible = "".join(c for c in part if unicodedata.category(c)[0] not in "MCZ")
        if visible and set(visible) == {"."} and (visible != part or len(visible) > 2):
            raise ToolError(f"path component {shorten(part)} looks like '.' or '..' but is not{fix}")
