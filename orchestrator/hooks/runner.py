"""Running one hook command: its own process group, JSON on stdin, bounded output, a timeout that kills the group.

The command line runs under ``/bin/sh -c`` (as Claude Code runs it), in the session's directory, with Loom's
environment plus ``LOOM_PROJECT_DIR`` and ``CLAUDE_PROJECT_DIR`` (the session's directory; Claude Code hooks use
the second). It starts in a new session, so it and everything it starts share one process group; when it times
out, or when it exits leaving children behind, that whole group is killed. Its stdout and stderr are read as they
come (a hook never blocks on a full pipe) and kept up to :data:`MAX_OUTPUT` bytes each.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass

import anyio
import anyio.abc

__all__ = ["MAX_OUTPUT", "ProcessResult", "run_command"]

MAX_OUTPUT = 256 * 1024
"""Bytes of stdout (and of stderr) kept from one hook run; the rest is read and dropped."""
_REAP_S = 5.0


@dataclass(frozen=True, slots=True)
class ProcessResult:
    """How one hook process ended."""

    exit_code: int | None
    """None: it did not exit by itself (timed out and killed, or never started)."""
    stdout: str
    stderr: str
    duration_ms: float
    problem: str = ""
    """Why it has no exit code (the timeout, or why it could not start)."""


async def run_command(command: str, payload: bytes, *, cwd: str, project: str, timeout_s: float) -> ProcessResult:
    """Run ``command`` with ``payload`` on its stdin; never raises for what the command does."""
    started = time.perf_counter()
    env = {**os.environ, "LOOM_PROJECT_DIR": project, "CLAUDE_PROJECT_DIR": project}
    try:
        process = await anyio.open_process(
            ["/bin/sh", "-c", command],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
    except OSError as exc:
        return ProcessResult(None, "", "", _ms(started), f"could not start: {exc.strerror or exc}")
    out, err = bytearray(), bytearray()
    timed_out = False
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_feed, process, payload)
            assert process.stdout is not None and process.stderr is not None
            tg.start_soon(_drain, process.stdout, out)
            tg.start_soon(_drain, process.stderr, err)
            with anyio.move_on_after(timeout_s) as scope:
                await process.wait()
            timed_out = scope.cancelled_caught
            # Exited (or timed out): what it left running in its group goes with it, which also closes the pipes
            # a lingering child held open, so the reads above end.
            _kill_group(process.pid)
    finally:
        with anyio.CancelScope(shield=True):
            _kill_group(process.pid)
            with anyio.move_on_after(_REAP_S):
                await process.wait()
            await process.aclose()
    stdout = out[:MAX_OUTPUT].decode("utf-8", errors="replace")
    stderr = err[:MAX_OUTPUT].decode("utf-8", errors="replace")
    if timed_out:
        return ProcessResult(None, stdout, stderr, _ms(started), f"timed out after {timeout_s:g} s and was killed")
    return ProcessResult(process.returncode, stdout, stderr, _ms(started))


async def _feed(process: anyio.abc.Process, payload: bytes) -> None:
    stdin = process.stdin
    assert stdin is not None
    # A hook that never reads its input (or exits first) is fine: only its exit and output matter.
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        await stdin.send(payload)
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        await stdin.aclose()


async def _drain(stream: anyio.abc.ByteReceiveStream, into: bytearray) -> None:
    with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        while True:
            chunk = await stream.receive()
            if len(into) < MAX_OUTPUT:
                into.extend(chunk[: MAX_OUTPUT - len(into)])


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 3)
