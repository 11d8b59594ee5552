"""Finding the daemon: its discovery file and the lock that makes it one per ``LOOM_HOME``.

``$LOOM_HOME/daemon.json`` (owner-only) says where the running daemon listens::

    {"url": "http://127.0.0.1:7878/mcp", "pid": 4242, "started": 1767225600.0}

It is written once the daemon is listening and removed when it exits cleanly. A daemon that was
killed leaves it behind, so readers check that the pid is alive (:func:`read_discovery`). The
single-instance guarantee comes from an exclusive ``flock`` on ``$LOOM_HOME/daemon.lock`` held for
the daemon's whole life: the kernel drops it when the process dies, however it dies, so a stale
discovery file never blocks a new daemon.

Only the standard library is imported here, so that clients can look the daemon up cheaply.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from orchestrator.daemon.auth import token_path

DISCOVERY_FILE = "daemon.json"
LOCK_FILE = "daemon.lock"


@dataclass(frozen=True, slots=True)
class Discovery:
    """Where a running daemon listens.

    Attributes:
        url: the MCP endpoint, ``http://127.0.0.1:PORT/mcp``.
        pid: the daemon's process id.
        started: when it started listening (seconds since the epoch).
        token_path: the file holding the bearer token it expects.
    """

    url: str
    pid: int
    started: float
    token_path: Path

    @property
    def health_url(self) -> str:
        """The daemon's ``GET /health`` endpoint (it needs the token too)."""
        return self.url.removesuffix("/mcp") + "/health"


class AlreadyRunning(Exception):
    """Another daemon holds this ``LOOM_HOME``."""

    def __init__(self, pid: int | None, url: str | None) -> None:
        self.pid = pid
        self.url = url
        where = ", ".join(part for part in (f"pid {pid}" if pid else "", url or "still starting") if part)
        super().__init__(f"a Loom daemon is already running ({where})")


def discovery_path(home: Path) -> Path:
    """Where the discovery file lives under ``home``."""
    return home / DISCOVERY_FILE


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, under another user
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return True  # no procfs (macOS): kill(0) is all we can know
    # A killed daemon whose parent has not reaped it yet still answers kill(0); its state is Z.
    return stat[stat.rfind(")") + 2 :][:1] not in ("Z", "X")


def read_discovery(home: Path) -> Discovery | None:
    """The running daemon for ``home``, or None if there is none (no file, unreadable, or its pid is dead).

    A live pid is no proof that it still answers (it may be shutting down, or the pid may have been
    reused), so callers must still handle a refused connection.
    """
    try:
        raw: Any = json.loads(discovery_path(home).read_text(encoding="utf-8"))
        url, pid, started = raw["url"], raw["pid"], raw["started"]
    except (OSError, ValueError, TypeError, KeyError):
        return None
    if not isinstance(url, str) or not isinstance(pid, int) or not isinstance(started, int | float):
        return None
    if not pid_alive(pid):
        return None
    return Discovery(url=url, pid=pid, started=float(started), token_path=token_path(home))


def write_discovery(home: Path, url: str) -> Discovery:
    """Publish this process as the daemon at ``url``; atomically, owner-only.

    Call with the instance lock held: a stale file from a killed daemon is simply replaced.
    """
    found = Discovery(url=url, pid=os.getpid(), started=time.time(), token_path=token_path(home))
    body = json.dumps({"url": found.url, "pid": found.pid, "started": found.started}) + "\n"
    final = discovery_path(home)
    temp = home / f".{DISCOVERY_FILE}.{found.pid}.tmp"
    temp.unlink(missing_ok=True)  # left by an earlier process with our pid that died mid-write
    # Created 0600 in one step, then renamed: readers see the old file or the whole new one.
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(body)
    os.replace(temp, final)
    return found


def remove_discovery(home: Path) -> None:
    """Remove the discovery file if it names this process (another one's is not ours to remove)."""
    path = discovery_path(home)
    try:
        raw: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if isinstance(raw, dict) and raw.get("pid") == os.getpid():
        path.unlink(missing_ok=True)


class InstanceLock:
    """The exclusive lock on ``home/daemon.lock`` that makes a daemon the only one for ``home``.

    The lock file also holds the owner's pid, so that a second starter can name it even before the
    discovery file exists. The file is never removed: unlinking a lock file lets two processes lock
    two different inodes of the same name.
    """

    def __init__(self, home: Path) -> None:
        self.path = home / LOCK_FILE
        self._fd: int | None = None

    def __enter__(self) -> Self:
        """Take the lock.

        Raises:
            AlreadyRunning: another process holds it.
        """
        fd, holder = take_lock(self.path, str(os.getpid()))
        if fd is None:
            found = read_discovery(self.path.parent)
            pid = int(holder) if holder.isdigit() else None
            raise AlreadyRunning(found.pid if found else pid, found.url if found else None)
        self._fd = fd
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            release_lock(fd)


def take_lock(path: Path, holder: str, *, shared: bool = False) -> tuple[int | None, str]:
    """Lock ``path`` exclusively (``flock``, created 0600 if missing) and write ``holder`` into it.

    ``shared`` takes a shared lock instead, which any number of processes may hold at once but no exclusive
    holder shares; a shared holder writes nothing (the file names the exclusive holder only).

    The file is never removed: unlinking a lock file lets two processes lock two different inodes of
    the same name. The descriptor is not inherited by children (PEP 446): a tool's background process
    must not keep the lock alive, and the kernel drops it when this process dies, however it dies.

    Returns:
        The descriptor holding the lock and ``holder``; or, if another process holds it, None and what
        that process wrote.

    Raises:
        OSError: the file cannot be opened (no such directory, a symlink, no permission).
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        other = _read_holder(fd)
        os.close(fd)
        return None, other
    except BaseException:
        os.close(fd)
        raise
    if shared:
        return fd, holder
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{holder}\n".encode(), 0)
    return fd, holder


def release_lock(fd: int) -> None:
    """Release a lock :func:`take_lock` took, clearing what it wrote."""
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
    os.close(fd)  # releases the lock


def _read_holder(fd: int) -> str:
    try:
        return os.pread(fd, 4096, 0).decode("utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return ""
