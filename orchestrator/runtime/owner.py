"""Which process owns a run, so that one process never marks another live process's runs interrupted.

An owner is ``"PID:STARTTIME"`` (the start time from ``/proc/PID/stat``, in clock ticks since boot),
so a recycled pid is not mistaken for the process that started the run. Where there is no procfs the
owner is the pid alone.
"""

from __future__ import annotations

import os
from pathlib import Path


def _start_time(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    # fields[0] is the state (field 3 of stat); the start time is field 22, i.e. fields[19]
    if len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return fields[19]


_THIS: tuple[int, str] | None = None
"""This process's owner id, with the pid it was made for (a forked child makes its own)."""


WORKER_OWNER = "worker:"
"""The owner prefix of a run the DBOS engine carries: ``worker:ID`` once a worker holds it, ``worker:`` while queued."""


def this_process() -> str:
    """The owner id of the current process (read from procfs once: every run records it, and it never changes)."""
    global _THIS
    pid = os.getpid()
    if _THIS is None or _THIS[0] != pid:
        start = _start_time(pid)
        _THIS = (pid, f"{pid}:{start}" if start is not None else str(pid))
    return _THIS[1]


def owner_alive(owner: str) -> bool:
    """Whether the process named by ``owner`` still runs (an empty or malformed owner is not alive).

    A run of the DBOS engine (owner ``worker:ID``) counts as alive wherever this is asked: whether its worker
    lives is the pool's business (:mod:`orchestrator.engine.pool`), which hands its runs to another worker, and no
    process may mark it interrupted for having no local pid.
    """
    if owner.startswith(WORKER_OWNER):
        return True
    pid_text, _, start = owner.partition(":")
    if not pid_text.isdigit():
        return False
    pid = int(pid_text)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, under another user
    now = _start_time(pid)
    if now is None:
        return not Path("/proc").is_dir()  # zombie, or no procfs to tell
    return not start or now == start
