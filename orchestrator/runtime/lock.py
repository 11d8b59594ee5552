"""One writer per ``LOOM_HOME``: the lock every embedded runtime, the daemon's included, holds while open.

Two processes running sessions on one store interleave their events and collide on the numbering
(``UNIQUE constraint failed: events.session_id, events.seq``), leaving runs ``running`` for good. So
an embedded runtime takes an exclusive ``flock`` on ``$LOOM_HOME/runtime.lock`` (0600) for its whole
life, the way the daemon's single-instance lock works (:mod:`orchestrator.daemon.discovery`), and a
second one refuses, naming the holder and saying how several clients share one runtime: the daemon.

Reading the store (``loom runs``, ``export``, ``trace``) takes no lock. Only the standard library and
the store's error type are imported here.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from orchestrator.daemon.discovery import release_lock, take_lock
from orchestrator.home import make_private
from orchestrator.store.interface import StoreError

LOCK_FILE = "runtime.lock"


class HomeInUse(StoreError):
    """Another process has an embedded runtime open on this ``LOOM_HOME``; the message says what to do."""

    def __init__(self, home: Path, pid: int | None, command: str) -> None:
        self.home = home
        self.pid = pid
        self.command = command
        """What the holder runs, e.g. ``loom mcp`` (empty if it did not say)."""
        who = ", ".join(part for part in (f"`{command}`" if command else "", f"pid {pid}" if pid else "") if part)
        self.holder = f"another Loom process ({who or 'unknown'})"
        """Who holds the lock, for a message: ``another Loom process (`loom mcp`, pid 42)``."""
        super().__init__(
            f"{self.holder} is running sessions on LOOM_HOME={home}, and only one "
            "process at a time may. To let several clients (loom run, loom mcp, other agents) share one runtime, "
            "start the daemon with `loom serve`: they all attach to it. Otherwise wait for that process to end, "
            "or stop it"
        )


def this_command() -> str:
    """How this process was started, for the lock's record: ``loom mcp``, ``loom serve``, ``pytest``..."""
    name = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    if name in ("loom", "main.py", "__main__.py") and len(sys.argv) > 1:
        return f"loom {sys.argv[1]}"[:100]
    return name[:100]


class RuntimeLock:
    """The exclusive lock on ``home/runtime.lock``; the file records the holder's pid and command."""

    def __init__(self, home: Path, *, shared: bool = False) -> None:
        self.home = home
        self.path = home / LOCK_FILE
        self.shared = shared
        """Shared: for ``loom run``, which only writes the session it creates, so several may run at once;
        a face (``loom mcp``, the daemon), which may drive any session, holds the lock exclusively."""
        self._fd: int | None = None

    def __enter__(self) -> Self:
        """Take the lock, creating ``home`` (0700) if needed.

        Raises:
            HomeInUse: another process holds it.
            StoreError: the home or the lock file cannot be created or opened.
        """
        record = json.dumps({"pid": os.getpid(), "command": this_command()})
        try:
            self.home.mkdir(mode=0o700, parents=True, exist_ok=True)
            make_private(self.home)  # a home an older Loom left readable by others
            fd, holder = take_lock(self.path, record, shared=self.shared)
        except OSError as exc:
            raise StoreError(f"cannot open {self.path}: {exc.strerror or exc}") from exc
        if fd is None:
            raise HomeInUse(self.home, *_holder(holder))
        self._fd = fd
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            release_lock(fd)


def _holder(text: str) -> tuple[int | None, str]:
    try:
        raw: Any = json.loads(text)
    except ValueError:
        return None, ""
    if not isinstance(raw, dict):
        return None, ""
    pid, command = raw.get("pid"), raw.get("command")
    return (pid if isinstance(pid, int) else None), (command if isinstance(command, str) else "")
