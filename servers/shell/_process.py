"""Running a command in its own process group, with bounded output and a kill that reaches every descendant.

The command gets its own session (``start_new_session=True``), so its process group id is its pid and every
process it starts without calling ``setsid`` itself shares that group. Ending the run therefore means signalling
the group, not the shell: killing only the shell would leave ``sleep 600 &`` or a test runner's workers behind.

Three things end a run early. A timeout, which is reported, not raised. Cancellation of the tool call, after which
the group is killed under a shield and the cancellation continues. And a background process that keeps stdout or
stderr open after the shell exited, which would otherwise keep the readers, and so the tool call, waiting forever.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.abc
import anyio.to_thread

from servers.shell._capture import HeadTailBuffer

__all__ = ["Completed", "StartError", "group_alive", "run_in_process_group", "terminate_group"]

_POLL_S = 0.05


class StartError(Exception):
    """The command's process could not be started (nothing ran)."""


@dataclass(frozen=True)
class Completed:
    """What happened to one command."""

    exit_code: int | None
    """The shell's exit status; negative when a signal ended it; None if it could not be collected."""
    stdout: HeadTailBuffer
    """Captured standard output."""
    stderr: HeadTailBuffer
    """Captured standard error."""
    timed_out: bool
    """Whether the timeout expired and the group was killed."""
    background_killed: bool
    """Whether a background process kept the output pipes open after the shell exited and had to be killed."""
    duration_s: float
    """Wall-clock time from start until the output was collected."""


async def run_in_process_group(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    timeout_s: float,
    max_output_bytes: int,
    term_grace_s: float,
    pipe_grace_s: float,
) -> Completed:
    """Run argv with stdin from /dev/null, capturing stdout and stderr, and never leave its process group behind.

    Args:
        argv: The program and its arguments.
        cwd: Working directory of the process.
        env: Its whole environment; None inherits this process's.
        timeout_s: Seconds to wait for the process to exit before killing its group.
        max_output_bytes: Most bytes kept from each of stdout and stderr.
        term_grace_s: Seconds between SIGTERM and SIGKILL when the group has to be ended.
        pipe_grace_s: Seconds to wait for the output pipes to close once the process has exited.

    Returns:
        The outcome; a timeout is reported in it rather than raised.

    Raises:
        StartError: If the process cannot be started.
    """
    stdout = HeadTailBuffer(max_output_bytes)
    stderr = HeadTailBuffer(max_output_bytes)
    started = time.monotonic()
    try:
        process = await anyio.open_process(
            list(argv),
            cwd=cwd,
            env=None if env is None else dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        raise StartError(f"could not start {argv[0]}: {exc.strerror or exc}") from exc
    timed_out = False
    background_killed = False
    try:
        async with anyio.create_task_group() as readers:
            drained = anyio.Event()
            readers.start_soon(_drain_both, process, stdout, stderr, drained)
            with anyio.move_on_after(timeout_s):
                await process.wait()
            if process.returncode is None:
                timed_out = True
                await terminate_group(process.pid, term_grace_s)
            with anyio.move_on_after(pipe_grace_s):
                await drained.wait()
            if not drained.is_set():
                # The shell is gone but something it started still holds the pipes.
                background_killed = True
                await terminate_group(process.pid, term_grace_s)
                with anyio.move_on_after(pipe_grace_s):
                    await drained.wait()
                # Whatever is left escaped the group (setsid); stop reading rather than wait for it.
                readers.cancel_scope.cancel()
    except BaseException:
        # Cancellation of the tool call lands here too; the group must die even though we are being cancelled.
        with anyio.CancelScope(shield=True):
            await terminate_group(process.pid, term_grace_s)
        raise
    finally:
        # aclose closes the pipes and reaps the shell; bounded in case a signal could not be delivered.
        with anyio.move_on_after(term_grace_s + 1, shield=True):
            await process.aclose()
    return Completed(
        exit_code=process.returncode,
        stdout=stdout,
        stderr=stderr,
        timed_out=timed_out,
        background_killed=background_killed,
        duration_s=time.monotonic() - started,
    )


async def terminate_group(pgid: int, grace_s: float) -> None:
    """SIGTERM a process group, give it grace_s to exit, then SIGKILL whatever is left.

    Args:
        pgid: The process group id.
        grace_s: Seconds to wait between the two signals.
    """
    if not _signal_group(pgid, signal.SIGTERM):
        return
    with anyio.move_on_after(grace_s):
        while True:
            if not await anyio.to_thread.run_sync(group_alive, pgid):
                return
            # Nothing signals the exit of processes that are not our children, so poll.
            await anyio.sleep(_POLL_S)
    _signal_group(pgid, signal.SIGKILL)


def group_alive(pgid: int) -> bool:
    """Whether any live (non-zombie) process remains in a process group.

    Zombies are ignored because they hold nothing and cannot be signalled away: an orphaned member stays a zombie
    until init reaps it, and some container inits never do.

    Args:
        pgid: The process group id.

    Returns:
        True if a live member remains (or if that cannot be determined, to err on the side of killing).
    """
    if not _signal_group(pgid, 0):
        return False
    try:
        pids = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return True
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
                stat = handle.read()
        except OSError:
            continue
        # The command name in parentheses may contain spaces; the fields after it are: state ppid pgrp ...
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            return True
    return False


def _signal_group(pgid: int, signum: int) -> bool:
    """Send a signal to a group; False if the group no longer exists."""
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        return False
    except PermissionError:
        # Some member is not ours to signal (a setuid program); the group still exists.
        return True
    return True


async def _drain_both(
    process: anyio.abc.Process, stdout: HeadTailBuffer, stderr: HeadTailBuffer, drained: anyio.Event
) -> None:
    assert process.stdout is not None and process.stderr is not None
    async with anyio.create_task_group() as group:
        group.start_soon(_drain, process.stdout, stdout)
        group.start_soon(_drain, process.stderr, stderr)
    drained.set()


async def _drain(stream: anyio.abc.ByteReceiveStream, sink: HeadTailBuffer) -> None:
    try:
        async for chunk in stream:
            sink.feed(chunk)
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        # The pipe was closed under us during cleanup; what was read so far is the output.
        pass
