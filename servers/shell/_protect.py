"""Paths inside the writable root that sandboxed commands may not change, whether or not they exist yet.

The paths are Loom's own configuration (``.loom``, ``AGENTS.md``, ...): a model that can rewrite its policy or its
instructions can grant itself anything. An existing path is bound read-only over itself inside the sandbox, and a
mount point cannot be removed or renamed, so writing, deleting, moving or replacing it fails.

A path that does not exist yet must not be creatable either, and an absent name cannot carry a mount. So before the
command starts the server creates a placeholder on the host, at the topmost missing component of the path (``.loom``
when the whole directory is missing, which covers ``.loom/policy.toml`` too), and binds that read-only. A
placeholder is an empty directory, or an empty file when it stands for the protected path itself and that name has
a suffix (``AGENTS.md``), so that ``cat`` and ``echo >`` get the answers a file gives. The trade-off: while a
command runs, the host sees that empty entry. Afterwards it is removed if it is still the same, empty thing; if
someone on the host filled it in meanwhile, it is kept. Placeholders are counted per process, so concurrent commands
share one and only the last to finish removes it.

Renaming a directory that contains a mount point is allowed, which would let ``mv sub sub2 && mkdir sub`` swap a
protected ``sub/.loom`` for a new one; so every directory between the root and a protected path is bound over
itself too (writable), which pins it in place.

Limits: a protected path that is a symlink has its target protected, but the link itself can still be replaced (a
mount cannot sit on a symlink). A hard link to a protected file made before the command started writes through.
Only sandboxed commands are held to any of this.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = ["ProtectMounts", "ProtectedPaths"]


@dataclass(frozen=True)
class ProtectMounts:
    """The binds that hold the protected paths for one command, in the order they must be mounted.

    Attributes:
        pinned: Directories bound writable over themselves so they cannot be renamed; parents come first.
        read_only: Paths bound read-only over themselves; parents come first.
    """

    pinned: tuple[Path, ...] = ()
    read_only: tuple[Path, ...] = ()


@dataclass
class _Placeholder:
    device: int
    inode: int
    users: int


_placeholders: dict[Path, _Placeholder] = {}
_placeholders_lock = threading.Lock()


class ProtectedPaths:
    """The protected paths of one server and the placeholders that stand in for the missing ones.

    Args:
        paths: Absolute paths; those outside root are read-only in the sandbox already and need nothing here.
        root: The resolved writable root.

    Raises:
        ValueError: If a path is not absolute.
    """

    def __init__(self, paths: Sequence[Path], root: Path) -> None:
        normalized: list[Path] = []
        for raw in paths:
            path = Path(raw)
            if not path.is_absolute():
                raise ValueError(f"protected path {str(raw)!r} is not absolute")
            normalized.append(Path(os.path.normpath(path)))
        self._paths = tuple(dict.fromkeys(normalized))
        self._root = root

    @property
    def inside_root(self) -> tuple[Path, ...]:
        """The protected paths that lie inside the root (as configured, not resolved)."""
        return tuple(path for path in self._paths if _inside(_resolve_parent(path), self._root))

    @contextmanager
    def hold(self) -> Iterator[ProtectMounts]:
        """Create the placeholders one command needs, yield its binds, and remove the placeholders afterwards.

        Paths are resolved here, on every command, because the tree changes between commands.
        """
        targets: list[Path] = []
        held: list[Path] = []
        try:
            for path in self._paths:
                target = self._target(path)
                if target is None:
                    continue
                state = _acquire(target, as_file=target == _resolve_parent(path) and bool(path.suffix))
                if state == "impossible":
                    # We could not create it, so neither can the command, which has fewer rights.
                    continue
                if state == "placeholder":
                    held.append(target)
                targets.append(target)
            yield _mounts(targets, self._root)
        finally:
            for target in held:
                _release_placeholder(target)

    def _target(self, path: Path) -> Path | None:
        """What to bind for path: itself (resolved), or its topmost missing component; None if not in the root."""
        resolved = _resolve_parent(path)
        if os.path.islink(resolved):
            resolved = resolved.resolve()
        if not _inside(resolved, self._root):
            return None
        missing = resolved
        for parent in resolved.parents:
            if parent == self._root or not _inside(parent, self._root):
                break
            if not os.path.lexists(parent):
                missing = parent
        return missing


def _mounts(targets: list[Path], root: Path) -> ProtectMounts:
    read_only = sorted(set(targets), key=lambda path: len(path.parts))
    # Inside a read-only bind everything is read-only already, and a pin there would be a writable hole.
    read_only = [path for path in read_only if not any(_inside(path, other) and path != other for other in read_only)]
    pinned = {
        parent
        for path in read_only
        for parent in path.parents
        if _inside(parent, root) and parent != root and not any(_inside(parent, other) for other in read_only)
    }
    return ProtectMounts(
        pinned=tuple(sorted(pinned, key=lambda path: len(path.parts))),
        read_only=tuple(read_only),
    )


def _acquire(path: Path, *, as_file: bool) -> Literal["existing", "placeholder", "impossible"]:
    """Make sure something exists at path to bind read-only, creating and registering a placeholder if need be.

    Returns:
        ``existing`` for a real path, ``placeholder`` for one of ours (new or shared with a running command), and
        ``impossible`` if nothing can be created there.
    """
    with _placeholders_lock:
        placeholder = _placeholders.get(path)
        if placeholder is not None and _identity(path) == (placeholder.device, placeholder.inode):
            placeholder.users += 1
            return "placeholder"
        if os.path.lexists(path):
            return "existing"
        try:
            if as_file:
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
            else:
                os.mkdir(path, 0o755)
        except FileExistsError:
            # Created on the host just now: a real path, bound read-only like any existing one.
            return "existing"
        except OSError:
            return "impossible"
        status = os.lstat(path)
        _placeholders[path] = _Placeholder(device=status.st_dev, inode=status.st_ino, users=1)
        return "placeholder"


def _release_placeholder(path: Path) -> None:
    """Drop one use of a placeholder; the last one removes it if it is still the empty entry that was created."""
    with _placeholders_lock:
        placeholder = _placeholders.get(path)
        if placeholder is None:
            return
        placeholder.users -= 1
        if placeholder.users > 0:
            return
        del _placeholders[path]
        try:
            status = os.lstat(path)
            if (status.st_dev, status.st_ino) != (placeholder.device, placeholder.inode):
                return
            if stat.S_ISDIR(status.st_mode):
                # rmdir refuses a directory someone filled in meanwhile, which is exactly when it must stay.
                os.rmdir(path)
            elif stat.S_ISREG(status.st_mode) and status.st_size == 0:
                os.unlink(path)
        except OSError:
            pass


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        status = os.lstat(path)
    except OSError:
        return None
    return status.st_dev, status.st_ino


def _resolve_parent(path: Path) -> Path:
    """The path with its parent directories' symlinks resolved but not its last component."""
    return path.parent.resolve() / path.name if path.name else path


def _inside(path: Path, directory: Path) -> bool:
    return path == directory or path.is_relative_to(directory)
