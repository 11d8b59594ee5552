"""Opening a path beneath a root directory descriptor without following any symlink.

`Roots.resolve` checks a path by name, and a name can change meaning after the check: a directory swapped for a
symlink to ``/`` between the check and the open (one ``renameat2(RENAME_EXCHANGE)`` in a background shell loop is
enough) would otherwise redirect the open outside the roots. So every open goes through `open_beneath`: the
path is taken relative to a descriptor of the root directory, and the open fails with ``ELOOP`` if any component
of it is a symlink. What is opened is then reached through real directories below the root, whatever happened to
the names in between.

Two implementations, one behaviour:

- ``openat2(2)`` (Linux 5.6+) with ``RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`` (which implies
  ``RESOLVE_NO_MAGICLINKS``): one system call, called through ctypes since Python has no wrapper.
- a walk, where ``openat2`` is missing (``ENOSYS``) or blocked by a seccomp filter (``EPERM``, as in some container
  runtimes): each directory is opened with ``O_PATH | O_NOFOLLOW`` relative to the previous one and checked with
  ``fstat`` to be a directory, and the last component is opened with ``O_NOFOLLOW``.

Symlinks inside the roots that lead inside them keep working because callers pass the path after `Path.resolve`
expanded them: the path opened here has no symlink left in it, unless one was planted after the check, and then the
open fails instead of following it. Callers pass paths without ``.`` or ``..`` components; both are refused.

What this cannot stop is a directory of the root being moved, as a real directory, to somewhere else by someone who
can write there too; that is not a path trick but a change of what the workspace contains.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
from typing import Literal

__all__ = ["USE_OPENAT2", "kernel_path", "make_dirs_beneath", "open_beneath", "stat_beneath"]

USE_OPENAT2 = True
"""Whether to try ``openat2`` at all; tests set this to False to exercise the walk on kernels that have it."""

_SYS_OPENAT2 = 437  # the same number on every architecture: openat2 came after the syscall tables were unified
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
_RESOLVE = _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS
# Errors meaning "openat2 is not available here", as opposed to an answer about the path.
_UNAVAILABLE = frozenset({errno.ENOSYS, errno.EPERM, errno.EINVAL, errno.E2BIG, errno.EOPNOTSUPP})
_DEFAULT_MODE = 0o666  # what open() uses; the umask applies


class _OpenHow(ctypes.Structure):
    """``struct open_how`` from ``linux/openat2.h``."""

    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_libc = ctypes.CDLL(None, use_errno=True)
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long
_syscall.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]

_openat2_works: bool | None = None
"""None until the first open probes whether openat2 can be used."""


def kernel_path() -> Literal["openat2", "walk"]:
    """Which implementation `open_beneath` uses in this process.

    Returns:
        ``"openat2"`` when the kernel call is available and enabled, ``"walk"`` otherwise.
    """
    return "openat2" if _openat2_available() else "walk"


def open_beneath(root_fd: int, relative: bytes, flags: int, mode: int = _DEFAULT_MODE) -> int:
    """Open a path below a directory descriptor, refusing to follow any symlink on the way.

    Args:
        root_fd: A descriptor of the directory the path is relative to (``O_PATH`` is enough).
        relative: A relative path without ``.`` or ``..`` components; ``b"."`` means the directory itself.
        flags: ``os.open`` flags; ``O_CLOEXEC`` is always added.
        mode: Permission bits for a file created with ``O_CREAT``.

    Returns:
        A new descriptor the caller must close.

    Raises:
        OSError: ``ELOOP`` if a component is a symlink, ``ENOENT``/``ENOTDIR`` if the path does not exist, or
            whatever else the open fails with.
    """
    parts = _components(relative)
    flags |= os.O_CLOEXEC
    if _openat2_available():
        return _openat2(root_fd, b"/".join(parts), flags, mode)
    return _walk(root_fd, parts, flags, mode)


def stat_beneath(root_fd: int, relative: bytes) -> os.stat_result | None:
    """The status of a path below a directory descriptor, without following symlinks, or None if it is missing.

    Args:
        root_fd: A descriptor of the directory the path is relative to.
        relative: As for `open_beneath`.

    Returns:
        The status of what the path names, or None if it or a parent does not exist.

    Raises:
        OSError: ``ELOOP`` if a component is a symlink, or another error from the open.
    """
    try:
        fd = open_beneath(root_fd, relative, os.O_PATH)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        return os.fstat(fd)
    finally:
        os.close(fd)


def make_dirs_beneath(root_fd: int, relative: bytes) -> int:
    """Open a directory below a directory descriptor, creating it and its missing parents first.

    Like ``mkdir -p``, but each directory is created relative to a verified descriptor of its parent, and a
    component that turns out to be a symlink stops the walk, so nothing is created through a symlink.

    Args:
        root_fd: A descriptor of the directory the path is relative to.
        relative: As for `open_beneath`.

    Returns:
        An ``O_PATH`` descriptor of the directory, which the caller must close.

    Raises:
        OSError: ``ELOOP`` if a component is a symlink, ``ENOTDIR`` if it is a file, or an error from mkdir.
    """
    try:
        return open_beneath(root_fd, relative, os.O_PATH | os.O_DIRECTORY)
    except FileNotFoundError:
        pass
    current = os.dup(root_fd)
    try:
        for name in _components(relative):
            try:
                step = _step(current, name)
            except FileNotFoundError:
                try:
                    os.mkdir(name, 0o777, dir_fd=current)
                except FileExistsError:
                    pass  # made by someone else meanwhile; the step below checks what it is
                step = _step(current, name)
            os.close(current)
            current = step
    except BaseException:
        os.close(current)
        raise
    return current


def _components(relative: bytes) -> list[bytes]:
    if relative in (b"", b"."):
        return [b"."]
    parts = relative.split(b"/")
    if relative.startswith(b"/") or any(part in (b"", b".", b"..") for part in parts):
        # Resolved paths never look like this; refusing keeps the walk free of any way to climb.
        raise OSError(errno.EINVAL, f"not a plain relative path: {relative!r}")
    return parts


def _openat2_available() -> bool:
    global _openat2_works
    if not USE_OPENAT2:
        return False
    if _openat2_works is None:
        probe = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.close(_openat2(probe, b".", os.O_PATH | os.O_CLOEXEC, 0))
            _openat2_works = True
        except OSError as exc:
            if exc.errno not in _UNAVAILABLE:
                raise
            _openat2_works = False
        finally:
            os.close(probe)
    return _openat2_works


def _openat2(dir_fd: int, path: bytes, flags: int, mode: int) -> int:
    # With RESOLVE_NO_SYMLINKS a trailing symlink already fails with ELOOP; O_NOFOLLOW together with O_PATH would
    # instead return a descriptor of the link itself, which no caller wants.
    # openat2 refuses a mode unless a file is created (O_TMPFILE includes the O_DIRECTORY bit, so compare all of it).
    creates = bool(flags & os.O_CREAT) or flags & os.O_TMPFILE == os.O_TMPFILE
    how = _OpenHow(flags & ~os.O_NOFOLLOW, mode if creates else 0, _RESOLVE)
    while True:
        fd = _syscall(_SYS_OPENAT2, dir_fd, path, ctypes.byref(how), ctypes.sizeof(how))
        if fd >= 0:
            return int(fd)
        code = ctypes.get_errno()
        if code != errno.EINTR:
            raise OSError(code, os.strerror(code), os.fsdecode(path))


def _walk(root_fd: int, parts: list[bytes], flags: int, mode: int) -> int:
    current = root_fd
    try:
        for name in parts[:-1]:
            step = _step(current, name)
            if current != root_fd:
                os.close(current)
            current = step
        fd = os.open(parts[-1], flags | os.O_NOFOLLOW, mode, dir_fd=current)
        if flags & os.O_PATH:
            # O_PATH | O_NOFOLLOW opens a final symlink itself rather than failing; refuse it like openat2 does.
            _refuse_symlink(fd, parts[-1])
        return fd
    finally:
        if current != root_fd:
            os.close(current)


def _step(dir_fd: int, name: bytes) -> int:
    """Open one directory component, checking on the opened descriptor that it is a directory and not a symlink."""
    fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    mode = _refuse_symlink(fd, name)
    if not stat.S_ISDIR(mode):
        os.close(fd)
        raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), os.fsdecode(name))
    return fd


def _refuse_symlink(fd: int, name: bytes) -> int:
    mode = os.fstat(fd).st_mode
    if stat.S_ISLNK(mode):
        os.close(fd)
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), os.fsdecode(name))
    return mode
