r"""Confinement of model-supplied paths to the fs server's allowed roots.

Every tool funnels its ``path`` argument through `Roots.resolve` before touching the disk. Relative paths are
taken against the first (primary) root; symlinks are resolved before the containment check, so a link inside a
root that points outside it is refused like ``..`` would be. For a path that does not exist yet, the existing
part of the parent chain is resolved and the rest is appended, which is what `Path.resolve` does when not strict.

That check is by name, and names can change between the check and the open. So the tools never open the resolved
path by name either: `Roots.open` opens it relative to a descriptor of its root, held since the server started,
with no symlink followed on the way (see `servers.fs._openat`). A directory swapped for a symlink after the check
makes the open fail instead of leading outside.

Paths are shown and accepted in the spelling of `servers.fs._names`: a byte of a name that is not valid UTF-8 is
shown as ``\xHH`` and may be passed back that way.
"""

from __future__ import annotations

import os
import unicodedata
import weakref
from collections.abc import Sequence
from pathlib import Path

from mcp.server.mcpserver.exceptions import ToolError

from servers.fs._names import escape, unescape
from servers.fs._openat import make_dirs_beneath, open_beneath, stat_beneath

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

    def __init__(self, roots: Sequence[Path], hidden: Sequence[Path] = ()) -> None:
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
        # As strings: the walk asks about every entry it meets, and Path.is_relative_to costs ~6 µs a call.
        # os.path.realpath is what Path.resolve does, without building a Path per component: a session's
        # hidden paths (the home's secrets) were a fifth of what opening its fs server cost.
        self._hidden = tuple(os.path.realpath(os.path.abspath(path)) for path in hidden)
        self._hidden_dirs = tuple(f"{hidden}/" for hidden in self._hidden)
        # Opened once: every later open is relative to these, so renaming or replacing a root's path later
        # cannot redirect the tools either.
        self._fds = tuple(os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC) for root in self._roots)
        weakref.finalize(self, _close_all, self._fds)

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
        candidate = Path(_check_syntax(raw))
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
            allowed = ", ".join(escape(str(root)) for root in self._roots)
            hint = "" if str(resolved) == os.path.normpath(candidate) else f" (it resolves to {escape(str(resolved))})"
            raise ToolError(
                f"path {shorten(raw)} resolves outside the allowed roots ({allowed}){hint}; use a path inside them"
            )
        if self.is_hidden(resolved):
            raise ToolError(f"path {shorten(raw)} is inside Loom's own state, which the file tools do not touch")
        return resolved

    def is_hidden(self, path: Path) -> bool:
        """Whether a resolved path lies in a hidden directory (Loom's home inside a workspace, say)."""
        if not self._hidden:
            return False
        text = str(path)
        return text in self._hidden or text.startswith(self._hidden_dirs)

    def display(self, path: Path) -> str:
        """Render a resolved path for a result or message.

        Paths inside the primary root are shown relative to it (``"."`` for the root itself), since relative input
        resolves against the primary root and the model can pass them straight back. Paths in other roots are shown
        absolute for the same reason: relative to their own root they would not round-trip.

        Args:
            path: An absolute path, normally one returned by `resolve`.

        Returns:
            The path as a POSIX string, spelled as `servers.fs._names.escape` does.
        """
        if path.is_relative_to(self.primary):
            return escape(path.relative_to(self.primary).as_posix())
        return escape(path.as_posix())

    def open(self, path: Path, flags: int, mode: int = 0o666) -> int:
        """Open a resolved path relative to its root's descriptor, following no symlink on the way.

        Args:
            path: A path returned by `resolve`, which has no symlinks left in it.
            flags: ``os.open`` flags.
            mode: Permission bits for a file created with ``O_CREAT``.

        Returns:
            A new descriptor the caller must close.

        Raises:
            OSError: ``ELOOP`` if a symlink appeared in the path since it was resolved, or any error of the open.
        """
        return open_beneath(*self._locate(path), flags, mode)

    def stat(self, path: Path) -> os.stat_result | None:
        """The status of a resolved path (not following symlinks), or None if it does not exist.

        Args:
            path: A path returned by `resolve`.

        Returns:
            Its status, or None if it or a parent is missing.

        Raises:
            OSError: ``ELOOP`` if a symlink appeared in the path since it was resolved, or any error of the lookup.
        """
        return stat_beneath(*self._locate(path))

    def make_dirs(self, path: Path) -> int:
        """Open a resolved directory path, creating it and its missing parents without following symlinks.

        Args:
            path: A path returned by `resolve`.

        Returns:
            An ``O_PATH`` descriptor of the directory, which the caller must close.

        Raises:
            OSError: ``ELOOP`` if a symlink appeared in the path, ``ENOTDIR`` if part of it is a file, and so on.
        """
        return make_dirs_beneath(*self._locate(path))

    def _locate(self, path: Path) -> tuple[int, bytes]:
        """The descriptor of the root holding a resolved path, and the path relative to that root."""
        for root, fd in zip(self._roots, self._fds, strict=True):
            if path.is_relative_to(root):
                return fd, os.fsencode(path.relative_to(root))
        # resolve() only returns paths inside a root; reaching this is a bug, and it must not open anything.
        raise ValueError(f"{escape(str(path))} is not inside an allowed root")


def _close_all(fds: tuple[int, ...]) -> None:
    for fd in fds:
        os.close(fd)


def _check_syntax(raw: str) -> str:
    r"""Reject paths no file system would accept, before they reach one, with a message saying how to fix them.

    Returns:
        The path with its ``\xHH`` escapes turned into the bytes they stand for.
    """
    if not raw or not raw.strip():
        raise ToolError("path is empty; pass a file or directory path ('.' means the root directory)")
    if "\x00" in raw:
        raise ToolError(f"path {shorten(raw)} contains a NUL byte, which no file name can contain; remove it")
    if len(raw) > MAX_PATH_CHARS:
        raise ToolError(f"path is {len(raw)} characters long; the limit is {MAX_PATH_CHARS}")
    try:
        decoded = unescape(raw)
    except ValueError:
        decoded = raw  # _check_look_alikes below refuses the stray backslash with a message saying so
    try:
        encoded = os.fsencode(decoded)
    except UnicodeError as exc:
        raise ToolError(f"path {shorten(raw)} contains characters that cannot be encoded as a file name") from exc
    for part in encoded.split(b"/"):
        if len(part) > MAX_COMPONENT_BYTES:
            name = escape(os.fsdecode(part))
            raise ToolError(
                f"path component {shorten(name)} is {len(part)} bytes; file names are limited to "
                f"{MAX_COMPONENT_BYTES} bytes"
            )
    _check_look_alikes(raw)
    return decoded


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
        try:
            unescape(raw)
        except ValueError:
            raise ToolError(
                f"path {shorten(raw)} contains a backslash, which is not a path separator here; use '/' (only "
                f"\\xHH escapes, as listings show names that are not UTF-8, are understood)"
            ) from None
    lowered = raw.lower()
    if any(code in lowered for code in _PERCENT_ESCAPES):
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
