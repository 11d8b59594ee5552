"""What of the host the shell sandbox hides from commands: host sockets and runtime directories.

Host UNIX sockets are not network, so they are hidden whether or not the network is on (see
`servers.shell._sandbox` for which directories and sockets, and why). Most of that decision depends only on the
server's environment and the host's layout, not on the session: the home directory, the socket variables' paths
with their symlinks resolved, and the files a command needs under the hidden directories. `host_hiding` works
that out once per process for each set of environment values it reads (`_host_paths`), so a session opening does
not resolve the same paths again on the event loop. Existence, which can change while Loom runs (an ssh-agent
started later), is checked again for every call: a socket is covered only if it is there, and a file is bound back
only if it is there, as bwrap needs both sources to exist.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

__all__ = ["Hiding", "host_hiding"]

_SOCKET_VARIABLES = ("SSH_AUTH_SOCK", "XDG_RUNTIME_DIR", "DOCKER_HOST", "DBUS_SESSION_BUS_ADDRESS")

_NEEDED_UNDER_HIDDEN = ("/etc/resolv.conf", "/etc/hosts", "/etc/localtime", "/etc/nsswitch.conf")


@dataclass(frozen=True)
class Hiding:
    """What of the host is hidden from commands, and what is bound back.

    Attributes:
        directories: Covered with an empty tmpfs, parents before children.
        sockets: Socket files covered with /dev/null (their directory could not be hidden whole).
        restored: Paths under the hidden directories bound back read-only.
    """

    directories: tuple[Path, ...] = ()
    sockets: tuple[Path, ...] = ()
    restored: tuple[Path, ...] = ()
    inside_root: tuple[Path, ...] = ()
    """Directories inside the writable root to hide (Loom's home there): covered after the root is bound."""

    def flags(self) -> list[str]:
        """The bwrap flags, in mount order."""
        flags: list[str] = []
        for directory in self.directories:
            flags += ["--tmpfs", str(directory)]
        for socket_path in self.sockets:
            flags += ["--ro-bind", "/dev/null", str(socket_path)]
        for path in self.restored:
            flags += ["--ro-bind", str(path), str(path)]
        return flags

    def late_flags(self) -> list[str]:
        """The flags that must come after the root's bind, which would otherwise cover them."""
        flags: list[str] = []
        for directory in self.inside_root:
            flags += ["--tmpfs", str(directory), "--remount-ro", str(directory)]
        return flags


def host_hiding(
    environ: Mapping[str, str], root: Path, keep: Collection[str] = (), hide: Collection[Path] = ()
) -> Hiding:
    """Decide which host directories and sockets to hide from commands.

    Args:
        environ: The server's environment, where the socket variables are read.
        root: The resolved writable root; nothing inside it is hidden.
        keep: Names of socket variables configured to pass through; their sockets are bound back.
        hide: More directories to hide whole (Loom's home); one that holds the root is left to the read-only
            protection instead, since hiding it would hide the workspace's own parents.

    Returns:
        The hiding to apply.
    """
    host = _host_paths(
        environ.get("HOME", ""), environ.get("PATH", ""), tuple(environ.get(name, "") for name in _SOCKET_VARIABLES)
    )
    directories: list[Path] = list(host.directories)
    sockets: list[Path] = []
    kept: list[Path] = []
    for name, path in host.sockets:
        if name in keep:
            kept.append(path)
            continue
        if _inside(path, root) or not os.path.lexists(path):
            continue
        directory = path if name == "XDG_RUNTIME_DIR" else path.parent
        if directory != Path("/") and not _inside(host.home, directory):
            directories.append(directory)
        elif directory != path:
            # Hiding / or the home directory would hide the toolchains too; cover just the socket.
            sockets.append(path)
    late: list[Path] = []
    for extra in hide:
        resolved = Path(os.path.abspath(extra)).resolve()
        if not resolved.is_dir() or _inside(root, resolved):
            continue
        (late if _inside(resolved, root) else directories).append(resolved)
    directories = [path for path in directories if not _inside(path, root)]
    hidden = _outermost([Path("/tmp"), *directories])
    directories = [path for path in hidden if path != Path("/tmp")]
    sockets = [path for path in sockets if not any(_inside(path, directory) for directory in hidden)]
    restored: list[Path] = []
    for raw, paths in host.needed:
        inside = [p for p in paths if any(_inside(p, d) for d in directories) and not _inside(p, root)]
        if inside and os.path.exists(raw):
            restored += inside
    restored += [path for path in kept if any(_inside(path, directory) for directory in hidden)]
    return Hiding(
        directories=tuple(directories),
        sockets=tuple(dict.fromkeys(sockets)),
        restored=tuple(dict.fromkeys(restored)),
        inside_root=tuple(dict.fromkeys(late)),
    )


@dataclass(frozen=True)
class _HostPaths:
    """What `host_hiding` reads from the environment and the host's layout, with symlinks resolved.

    Attributes:
        home: The resolved home directory.
        directories: Always hidden: /run, and /var/run when it is a real directory.
        sockets: Each socket variable that names a path, and that path resolved (whether or not it exists).
        needed: Each absolute file or PATH entry a command may need, and its normalised and resolved paths.
    """

    home: Path
    directories: tuple[Path, ...]
    sockets: tuple[tuple[str, Path], ...]
    needed: tuple[tuple[str, tuple[Path, ...]], ...]


@lru_cache(maxsize=8)
def _host_paths(home: str, search_path: str, socket_values: tuple[str, ...]) -> _HostPaths:
    """The session-independent part of `host_hiding`, once per process for each set of environment values."""
    resolved_home = Path(home or os.path.expanduser("~")).resolve()
    directories = [Path("/run")]
    var_run = Path("/var/run")
    if var_run.is_dir() and not var_run.is_symlink():
        directories.append(var_run)
    sockets: list[tuple[str, Path]] = []
    for name, value in zip(_SOCKET_VARIABLES, socket_values, strict=True):
        path = _socket_path(name, value)
        if path is not None:
            sockets.append((name, path.resolve()))
    needed: list[tuple[str, tuple[Path, ...]]] = []
    for raw in [*_NEEDED_UNDER_HIDDEN, *search_path.split(os.pathsep)]:
        if raw and os.path.isabs(raw):
            needed.append((raw, tuple(dict.fromkeys([Path(os.path.normpath(raw)), Path(raw).resolve()]))))
    return _HostPaths(resolved_home, tuple(directories), tuple(sockets), tuple(needed))


def _socket_path(name: str, value: str) -> Path | None:
    """The filesystem path a socket variable names, if it names one."""
    if name == "DOCKER_HOST":
        value = value.removeprefix("unix://") if value.startswith("unix://") else ""
    elif name == "DBUS_SESSION_BUS_ADDRESS":
        # "unix:path=/run/user/1000/bus,guid=..."; of several addresses separated by ';' the first is used.
        first = value.split(";")[0]
        paths = [field[5:] for field in first.removeprefix("unix:").split(",") if field.startswith("path=")]
        value = paths[0] if first.startswith("unix:") and paths else ""
    return Path(value) if value and os.path.isabs(value) else None


def _outermost(paths: Sequence[Path]) -> list[Path]:
    """The paths not inside another of them, parents first."""
    unique = sorted(set(paths), key=lambda path: (len(path.parts), str(path)))
    return [path for path in unique if not any(_inside(path, other) and path != other for other in unique)]


def _inside(path: Path, directory: Path) -> bool:
    # What ``path.is_relative_to(directory)`` says of the absolute, normalised paths used here, by string prefix:
    # pathlib's version parses both paths again on every call, and this runs hundreds of times per server built.
    if path == directory:
        return True
    prefix = str(directory)
    return str(path).startswith(prefix if prefix.endswith("/") else prefix + "/")
