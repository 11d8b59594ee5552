"""The optional bubblewrap (``bwrap``) sandbox around each shell command.

Inside the sandbox the whole filesystem is mounted read-only, the workspace root is bound writable over it, /tmp
is a private tmpfs that disappears with the command, and /dev and /proc are the minimal ones bwrap provides. With
``network=False`` the command also gets its own network namespace, which has only a loopback interface.

Flags that matter for safety and for killing:

- ``--cap-drop ALL``: run as root, bwrap keeps every capability by default, and a root shell with CAP_SYS_ADMIN
  can simply ``mount -o remount,rw /`` inside its mount namespace. Dropping them makes the read-only mounts hold.
- No ``--new-session``: bwrap itself is started as the leader of a fresh session and process group, so it has no
  controlling terminal for the TIOCSTI escape that flag guards against; calling setsid again inside would move the
  command out of bwrap's process group, and signalling that group is how a timeout or a cancel reaches everything.
- No ``--unshare-pid`` (and so no ``--as-pid-1``): a pid namespace would kill a redirected background job
  (``server > log 2>&1 &``) the moment the command ends, which the shell tool promises not to do, and the pids a
  command prints would not be the host's.
- ``--die-with-parent``: if bwrap is killed, the sandboxed shell gets SIGKILL even if it ignores SIGTERM.

Availability is decided by running bwrap once with the same flags (kernels and containers may forbid the
namespaces it needs), and the answer is cached per bwrap executable for the life of the process.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

__all__ = ["INSTALL_HINT", "Sandbox", "SandboxMode", "bwrap_problem", "probe_bwrap", "resolve_sandbox"]

SandboxMode = Literal["auto", "bwrap", "off"]
"""``auto``: sandbox when bwrap works here; ``bwrap``: sandbox or refuse to start; ``off``: never sandbox."""

INSTALL_HINT = "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap)"
"""How to get bwrap, for error messages."""

_PROBE_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Sandbox:
    """How to wrap a command so that it runs inside bwrap, confined to one writable root.

    Attributes:
        bwrap: Absolute path of the bwrap executable.
        root: The resolved workspace root, the only writable host directory.
        network: Whether the command keeps the host's network.
    """

    bwrap: str
    root: Path
    network: bool

    def wrap(self, argv: Sequence[str], cwd: Path) -> list[str]:
        """The argv that runs argv inside the sandbox with cwd as its working directory."""
        return [self.bwrap, *_sandbox_flags(self.network, self.root), "--chdir", str(cwd), "--", *argv]

    def describe(self) -> str:
        """One sentence for the model about what the sandbox allows."""
        network = "" if self.network else " There is no network access (only an empty loopback)."
        return (
            f"Commands run in a bwrap sandbox: the filesystem is read-only except {self.root} and a private /tmp "
            f"that is emptied after every command, so writing anywhere else fails with 'Read-only file system'."
            f"{network}"
        )


def _sandbox_flags(network: bool, root: Path | None) -> list[str]:
    flags = ["--die-with-parent", "--cap-drop", "ALL"]
    if not network:
        flags.append("--unshare-net")
    # Mounts apply in order: /tmp's tmpfs must come before the root's bind, or it would hide a root under /tmp.
    flags += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    if root is not None:
        flags += ["--bind", str(root), str(root)]
    return flags


@cache
def probe_bwrap(bwrap: str, network: bool) -> str | None:
    """Run bwrap once with the sandbox's flags and report why it cannot be used, if it cannot.

    Args:
        bwrap: Path of the bwrap executable.
        network: Whether to probe with the network kept (False also probes ``--unshare-net``).

    Returns:
        None if a sandboxed ``true`` ran and exited 0, else a one-line reason. Cached per (bwrap, network).
    """
    argv = [bwrap, *_sandbox_flags(network, None), "--", "/bin/sh", "-c", "exit 0"]
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


def resolve_sandbox(mode: SandboxMode, root: Path, network: bool) -> Sandbox | None:
    """Decide whether commands are sandboxed, from the requested mode and what works on this machine.

    Args:
        mode: ``auto``, ``bwrap`` or ``off``.
        root: The resolved workspace root.
        network: False to cut commands off the network, which only the sandbox can do.

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
        return Sandbox(bwrap=bwrap, root=root, network=network)
    if mode == "bwrap":
        raise ValueError(f"sandbox 'bwrap' was requested but cannot be used: {problem}")
    if not network:
        raise ValueError(f"network=False (--no-network) needs the bwrap sandbox, which cannot be used: {problem}")
    return None
