"""The optional bubblewrap (``bwrap``) sandbox around each shell command.

Inside the sandbox the whole filesystem is mounted read-only, the workspace root is bound writable over it, /tmp
is a private tmpfs that disappears with the command, and /dev and /proc are the minimal ones bwrap provides. With
``network=False`` the command also gets its own network namespace, which has only a loopback interface. Protected
paths inside the root (Loom's own configuration) are bound read-only over the root; see `servers.shell._protect`.

Flags that matter for safety and for killing:

- ``--cap-drop ALL``: run as root, bwrap keeps every capability by default, and a root shell with CAP_SYS_ADMIN
  can simply ``mount -o remount,rw /`` inside its mount namespace. Dropping them makes the read-only mounts hold.
- ``--unshare-pid``: without a pid namespace the command sees the host's processes, and ``/proc/<pid>/root`` of
  one it may trace (bwrap's own parent process is one) is the host's root, writable. With it the command sees only
  its own processes. The price: bwrap is the namespace's init, and when the command ends, init exits and the kernel
  kills everything left in the namespace, so a redirected background job (``server > log 2>&1 &``) no longer
  outlives the command. Pids the command prints are the namespace's, not the host's.
- ``--unshare-user --disable-userns``, where the kernel allows it: the mounts then belong to a user namespace the
  command cannot leave, and it cannot create nested user namespaces to regain capabilities in. The same ids are
  kept (bwrap maps the caller's uid and gid). Where it fails its test run the sandbox goes on without it, and
  `Sandbox.describe` says why; the other flags do not depend on it.
- No ``--new-session``: bwrap itself is started as the leader of a fresh session and process group, so it has no
  controlling terminal for the TIOCSTI escape that flag guards against; calling setsid again inside would move the
  command out of bwrap's process group, and signalling that group is how a timeout or a cancel reaches everything.
  Processes in the pid namespace keep that (host) process group, and bwrap dying takes the namespace with it.
- ``--die-with-parent``: if bwrap is killed, the sandboxed shell gets SIGKILL even if it ignores SIGTERM.

Host UNIX sockets are not network, so they are hidden whether or not the network is on: a reachable docker.sock or
ssh-agent acts with the user's full authority. /run (and /var/run when it is a real directory rather than the usual
link to /run) becomes an empty tmpfs, as do the directories of ``$SSH_AUTH_SOCK``, ``$XDG_RUNTIME_DIR``, a
``unix://`` ``$DOCKER_HOST`` and a ``unix:path=`` D-Bus address, unless they lie inside the root. Where such a
directory is ``/`` or the home directory (or above it), only the socket itself is covered with /dev/null. A socket
whose variable is configured to pass (``env_pass``) stays reachable. Files a command needs that live under the
hidden directories (``/etc/resolv.conf`` is often a link into /run, NixOS keeps its PATH there) are bound back
read-only. Abstract sockets live in the network namespace and are cut off only with ``network=False``.
Which ones, for a given environment and root, `servers.shell._hiding.host_hiding` decides.

Mounts apply in order: the tmpfs mounts come before the root's bind, so a root under /tmp or /run stays visible,
and the protected paths come after it.

Availability is decided by running bwrap once with the same flags (kernels and containers may forbid the
namespaces it needs), and the answer is cached per bwrap executable for the life of the process.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

from servers.shell._hiding import Hiding, host_hiding
from servers.shell._protect import ProtectMounts

__all__ = [
    "INSTALL_HINT",
    "Hiding",
    "Sandbox",
    "SandboxMode",
    "bwrap_problem",
    "host_hiding",
    "probe_bwrap",
    "probe_userns",
    "resolve_sandbox",
]

SandboxMode = Literal["auto", "bwrap", "off"]
"""``auto``: sandbox when bwrap works here; ``bwrap``: sandbox or refuse to start; ``off``: never sandbox."""

INSTALL_HINT = "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap)"
"""How to get bwrap, for error messages."""

_PROBE_TIMEOUT_S = 10.0

_USERNS_CHOICES = (("--unshare-user", "--disable-userns"), ("--unshare-user",))
"""Tried in order; bwrap before 0.8 has no --disable-userns, which is still worth a user namespace without it."""


@dataclass(frozen=True)
class Sandbox:
    """How to wrap a command so that it runs inside bwrap, confined to one writable root.

    Attributes:
        bwrap: Absolute path of the bwrap executable.
        root: The resolved workspace root, the only writable host directory.
        network: Whether the command keeps the host's network.
        userns: The user-namespace flags that passed their test run (empty if none did).
        userns_problem: Why there is no user namespace, or None.
        hiding: The host directories and sockets hidden from commands.
        protected: Protected paths inside the root, for the description (the binds come with each command).
    """

    bwrap: str
    root: Path
    network: bool
    userns: tuple[str, ...] = ()
    userns_problem: str | None = None
    hiding: Hiding = Hiding()
    protected: tuple[Path, ...] = ()

    def wrap(self, argv: Sequence[str], cwd: Path, protect: ProtectMounts | None = None) -> list[str]:
        """The argv that runs argv inside the sandbox with cwd as its working directory.

        Args:
            argv: The command.
            cwd: Its working directory (inside the root).
            protect: This command's binds for the protected paths, from `ProtectedPaths.hold`.
        """
        flags = [
            *_base_flags(self.network, self.userns),
            *self.hiding.flags(),
            "--bind",
            str(self.root),
            str(self.root),
        ]
        if protect is not None:
            for path in protect.pinned:
                flags += ["--bind", str(path), str(path)]
            for path in protect.read_only:
                flags += ["--ro-bind", str(path), str(path)]
        flags += self.hiding.late_flags()
        return [self.bwrap, *flags, "--chdir", str(cwd), "--", *argv]

    def describe(self) -> str:
        """Sentences for the model about what the sandbox allows."""
        parts = [
            f"Commands run in a bwrap sandbox: the filesystem is read-only except {self.root} and a private /tmp "
            f"that is emptied after every command, so writing anywhere else fails with 'Read-only file system'."
        ]
        if self.protected:
            parts.append(
                f"Inside {self.root} these stay read-only and cannot be created, replaced, moved or deleted (they "
                f"are Loom's configuration; change them only by asking the user): {self.protected_names()}."
            )
        hidden = [str(path) for path in (*self.hiding.directories, *self.hiding.sockets, *self.hiding.inside_root)]
        if hidden:
            verb = "is" if len(hidden) == 1 else "are"
            parts.append(f"Host sockets and runtime directories are hidden ({', '.join(hidden)} {verb} empty).")
        parts.append(
            "Each command has its own process namespace: it sees only its own processes, and everything it "
            "starts, background jobs included, is killed when it ends, so nothing keeps running between calls."
        )
        if not self.network:
            parts.append("There is no network access (only an empty loopback).")
        if self.userns_problem is not None:
            parts.append(f"(No user namespace here: {self.userns_problem}.)")
        return " ".join(parts)

    def protected_names(self) -> str:
        """The protected paths, relative to the root, comma-separated."""
        return ", ".join(str(path.relative_to(self.root)) if path != self.root else "." for path in self.protected)


def _base_flags(network: bool, userns: Sequence[str]) -> list[str]:
    flags = ["--die-with-parent", "--cap-drop", "ALL", "--unshare-pid", *userns]
    if not network:
        flags.append("--unshare-net")
    return [*flags, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]


@cache
def probe_bwrap(bwrap: str, network: bool) -> str | None:
    """Run bwrap once with the sandbox's flags (no user namespace) and report why it cannot be used, if it cannot.

    Args:
        bwrap: Path of the bwrap executable.
        network: Whether to probe with the network kept (False also probes ``--unshare-net``).

    Returns:
        None if a sandboxed ``true`` ran and exited 0, else a one-line reason. Cached per (bwrap, network).
    """
    return _try(bwrap, _base_flags(network, ()))


@cache
def probe_userns(bwrap: str, network: bool) -> tuple[tuple[str, ...], str | None]:
    """Find the user-namespace flags this bwrap and kernel accept on top of the sandbox's other flags.

    Args:
        bwrap: Path of the bwrap executable (which passed `probe_bwrap`).
        network: Whether the network is kept.

    Returns:
        The flags to use and None, or no flags and why the first choice failed. Cached per (bwrap, network).
    """
    first_problem: str | None = None
    for choice in _USERNS_CHOICES:
        problem = _try(bwrap, _base_flags(network, choice))
        if problem is None:
            return choice, None
        first_problem = first_problem or problem
    return (), first_problem


def _try(bwrap: str, flags: Sequence[str]) -> str | None:
    argv = [bwrap, *flags, "--", "/bin/sh", "-c", "exit 0"]
    try:
        done = subprocess.run(
            argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=_PROBE_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{bwrap} could not be run: {exc}"
    if done.returncode == 0:
        return None
    detail = done.stderr.decode("utf-8", errors="replace").strip().splitlines()
    return f"{bwrap} failed a test run (exit {done.returncode}): {detail[-1] if detail else 'no message'}"


def bwrap_problem(network: bool = True) -> str | None:
    """Why the bwrap sandbox cannot be used here, or None if it can.

    Args:
        network: False to ask about the sandbox without network (``--unshare-net``).

    Returns:
        None if bwrap is on PATH and passed its test run, else a one-line reason fit for an error or a skip.
    """
    return _find_bwrap(network)[1]


def _find_bwrap(network: bool) -> tuple[str | None, str | None]:
    """The path of bwrap if it is on PATH, and why it cannot be used (None if it can)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return None, f"bwrap was not found on PATH; {INSTALL_HINT}"
    return bwrap, probe_bwrap(bwrap, network)


def resolve_sandbox(
    mode: SandboxMode,
    root: Path,
    network: bool,
    *,
    hiding: Hiding | None = None,
    protected: Sequence[Path] = (),
) -> Sandbox | None:
    """Decide whether commands are sandboxed, from the requested mode and what works on this machine.

    Args:
        mode: ``auto``, ``bwrap`` or ``off``.
        root: The resolved workspace root.
        network: False to cut commands off the network, which only the sandbox can do.
        hiding: What of the host to hide; `host_hiding` of the current environment when None.
        protected: Protected paths inside the root, for the description.

    Returns:
        The sandbox to use, or None to run commands unsandboxed.

    Raises:
        ValueError: If mode is unknown, if ``bwrap`` was required but is missing or does not work here, or if
            network=False was asked for without a working sandbox (refused rather than silently ignored).
    """
    if mode not in ("auto", "bwrap", "off"):
        raise ValueError(f"sandbox must be 'auto', 'bwrap' or 'off', got {mode!r}")
    if mode == "off":
        if not network:
            raise ValueError("network=False (--no-network) needs the bwrap sandbox, but sandbox is 'off'")
        return None
    bwrap, problem = _find_bwrap(network)
    if bwrap is not None and problem is None:
        userns, userns_problem = probe_userns(bwrap, network)
        return Sandbox(
            bwrap=bwrap,
            root=root,
            network=network,
            userns=userns,
            userns_problem=userns_problem,
            hiding=host_hiding(os.environ, root) if hiding is None else hiding,
            protected=tuple(protected),
        )
    if mode == "bwrap":
        raise ValueError(f"sandbox 'bwrap' was requested but cannot be used: {problem}")
    if not network:
        raise ValueError(f"network=False (--no-network) needs the bwrap sandbox, which cannot be used: {problem}")
    return None
