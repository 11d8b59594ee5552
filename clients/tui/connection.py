"""The TUI's link to the daemon: starting ``loom serve`` when none runs, and attaching to it.

The TUI is a client of the daemon only: it never opens Loom's face in its own process (closing the TUI must
not end a run, and several TUIs must see one session), so it opens its client with ``require_daemon``, which
fails when the daemon is gone instead of falling back to an in-process face.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio

from clients.loom import LoomClient, daemon_running, open_client

__all__ = ["CLIENT_NAME", "DECIDED_BY", "DaemonStartFailed", "attach", "daemon_log", "start_daemon", "wait_for_daemon"]

CLIENT_NAME = "loom-tui"
"""The ``clientInfo`` name the TUI gives the face (the daemon logs it)."""

DECIDED_BY = "tui"
"""Who the TUI's decisions are recorded as (``loom approve`` records ``cli``): what another client's card shows."""

START_TIMEOUT_S = 20.0
"""How long a daemon started here may take to write its discovery file (it opens the store and its servers)."""


class DaemonStartFailed(Exception):
    """``loom serve`` started from the TUI exited, or did not come up in time; the message says why."""


def daemon_log(home: Path) -> Path:
    """Where a daemon started by the TUI writes its stderr."""
    return home / "daemon.log"


def _spawn(home: Path, cwd: Path) -> subprocess.Popen[bytes]:
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    log = daemon_log(home).open("ab")
    try:
        # A session of its own: the terminal's Ctrl-C (and the TUI's exit) must not reach the daemon's runs.
        return subprocess.Popen(
            [sys.executable, "-m", "clients.cli.main", "serve"],
            cwd=cwd,
            env={**os.environ, "LOOM_HOME": str(home)},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            start_new_session=True,
        )
    finally:
        log.close()


async def start_daemon(home: Path, cwd: Path, *, timeout_s: float = START_TIMEOUT_S) -> int:
    """Start ``loom serve`` for ``home`` in the background and wait (bounded) for its discovery file.

    Returns:
        The daemon's process id.

    Raises:
        DaemonStartFailed: it exited first (say, its port is taken), or did not come up within ``timeout_s``.
    """
    proc = await anyio.to_thread.run_sync(_spawn, home, cwd)
    with anyio.move_on_after(timeout_s):
        while not await anyio.to_thread.run_sync(daemon_running, home):
            if proc.poll() is not None:
                tail = await anyio.to_thread.run_sync(_log_tail, home)
                raise DaemonStartFailed(f"loom serve exited with {proc.returncode}: {tail}")
            await anyio.sleep(0.1)
        return proc.pid
    raise DaemonStartFailed(f"loom serve did not come up within {timeout_s:.0f} s (see {daemon_log(home)})")


def _log_tail(home: Path) -> str:
    try:
        lines = daemon_log(home).read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return "no log"
    return lines[-1] if lines else "no output"


async def wait_for_daemon(home: Path, *, poll_s: float = 1.0) -> None:
    """Return once a daemon runs for ``home`` (the caller bounds the wait, or shows that it waits)."""
    # The discovery file is the only sign a daemon gives, so there is no event to wait on: poll it.
    while not await anyio.to_thread.run_sync(daemon_running, home):  # noqa: ASYNC110
        await anyio.sleep(poll_s)


@contextlib.asynccontextmanager
async def attach(home: Path) -> AsyncIterator[LoomClient]:
    """A client of the daemon running for ``home``.

    Raises:
        clients.loom.daemon.DaemonNotRunning: none runs.
        orchestrator.daemon.auth.TokenError: its token cannot be read.
    """
    async with open_client(home, client_name=CLIENT_NAME, require_daemon=True) as client:
        yield client
