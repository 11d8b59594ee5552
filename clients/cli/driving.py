"""How a CLI command drives Loom: one client (:mod:`clients.loom`), its errors in CLI terms, a run watched to its end.

Every command that touches sessions runs as :func:`with_client`: it connects to the daemon when one runs,
else to a face in this process, and turns what can go wrong (a face's refusal, a bad config, a home
another process holds) into one ``loom: error:`` line and an exit code. :func:`watch_run` is how ``loom
run`` and ``loom resume`` show a run, identically on a daemon and in-process.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

from clients.cli.errors import cli_message, first_of
from clients.cli.exits import EXIT_CANCELLED, EXIT_FAILED, EXIT_OK, EXIT_USAGE
from clients.cli.output import discard_stdout
from clients.loom import FaceError, LiveFollower, LoomClient, open_client
from orchestrator.config import ConfigError
from orchestrator.daemon.auth import TokenError
from orchestrator.events import Event, RunFinished
from orchestrator.face.local import CannotOpen
from orchestrator.protocol import STORE_FAILURE

__all__ = ["EXIT_CODES", "fail", "watch_run", "with_client"]

EXIT_CODES = {"completed": EXIT_OK, "cancelled": EXIT_CANCELLED}
"""A run's final status as the exit code (anything else: ``EXIT_FAILED``)."""

_ENDED = frozenset({"completed", "failed", "cancelled", "interrupted"})
"""Statuses after which a run emits nothing more (``needs_review`` may still be answered and go on)."""


def fail(message: str, code: int = EXIT_USAGE) -> int:
    """Say ``message`` as the CLI's error line on stderr, and return ``code``."""
    sys.stderr.write(f"loom: error: {message}\n")
    return code


def with_client(
    main: Callable[[LoomClient], Awaitable[int]],
    *,
    cwd: Path | None = None,
    config_path: Path | None = None,
    shared: bool = False,
) -> int:
    """Run ``main`` with a client of Loom (the daemon's face, else one in this process) and return its exit code.

    A face's refusal, a bad configuration or a home in use exits 2 with the reason; a store that fails, 1;
    Ctrl-C before a run was started, 130.
    """

    async def connected() -> int:
        async with open_client(cwd=cwd, config_path=config_path, shared=shared) as client:
            return await main(client)

    try:
        return anyio.run(connected)
    except KeyboardInterrupt:
        return EXIT_CANCELLED
    except (FaceError, ConfigError, CannotOpen, TokenError, BaseExceptionGroup) as exc:
        # Raised inside the client's task groups, an error reaches us wrapped in exception groups.
        face = first_of(exc, FaceError)
        if face is not None:
            return fail(cli_message(str(face)))  # the CLI's commands, not the face's tools, named
        config = first_of(exc, ConfigError)
        if config is not None:
            return fail(str(config))
        cannot = first_of(exc, CannotOpen)
        if cannot is not None:
            return fail(str(cannot), EXIT_USAGE if cannot.usage else EXIT_FAILED)
        token = first_of(exc, TokenError)
        if token is not None:
            return fail(str(token))
        lost = _daemon_lost(exc)
        if lost is not None:
            return fail(lost, EXIT_FAILED)
        raise
    except Exception as exc:
        lost = _daemon_lost(exc)
        if lost is None:
            raise
        return fail(lost, EXIT_FAILED)


def _daemon_lost(exc: BaseException) -> str | None:
    """What to tell the user when the daemon's connection broke under the command (it was killed, say); else None.

    Only the daemon's face is reached over HTTP, so a transport error here means the daemon went away mid-call.
    """
    import httpx2  # already imported whenever the daemon was reached; on this error path only

    broken = first_of(exc, httpx2.TransportError)
    if broken is None:
        return None
    return (
        f"the connection to the Loom daemon broke while this command ran ({type(broken).__name__}: {broken}); "
        "the daemon may have stopped or been killed, so whether the command took effect is unknown. "
        "Check with `loom sessions` (it works without the daemon), start the daemon again with `loom serve` if you "
        "want it, and retry"
    )


async def watch_run(
    client: LoomClient, session_id: str, run_id: str, after_seq: int, renderer: Callable[[Event], None]
) -> str:
    """Show the session's events from ``after_seq`` until run ``run_id`` ends, and return its final status.

    A run that failed because Loom's database did also gets the CLI's ``loom: error:`` line on stderr (with
    ``--json`` too): it is Loom that failed, and the user must act (free some space, say).

    Every stored message's text is given as ``text_delta`` events (live as the model writes it), so that
    ``--json`` output has the same event types whichever face ran the run. Ctrl-C or SIGTERM cancels the run
    (it is recorded as cancelled); a closed stdout (``loom run ... | head``) does too.
    """
    follower = LiveFollower(session_id, after_seq, every_message=True)
    status = ""
    show = renderer
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with anyio.create_task_group() as tg:

            async def cancel_on_signal() -> None:
                async for _ in signals:
                    await client.cancel_run(run_id)
                    return

            tg.start_soon(cancel_on_signal)
            ended = ""  # the status get_run reported, once the run is over and its last events are drained
            while not status:
                events = await follower.next(client, 0 if ended else 30)
                for event in events:
                    try:
                        show(event)
                    except BrokenPipeError:
                        # Whoever read our output is gone: stop the run as Ctrl-C would, rather than crash
                        # with a traceback or keep an agent working that nobody watches.
                        discard_stdout()
                        sys.stderr.write("loom: stdout was closed; cancelling the run\n")
                        show = _nothing
                        await client.cancel_run(run_id)
                    if isinstance(event, RunFinished) and event.run_id == run_id:
                        status = event.status
                        if event.reason.startswith(STORE_FAILURE):
                            fail(event.reason.removeprefix(STORE_FAILURE))
                if not events and not status:
                    if ended:
                        status = ended
                    else:
                        # A quiet long-poll: check the run still goes (a run the face lost would be silent
                        # forever); if it has ended, take what was stored since, then stop.
                        run = await client.get_run(run_id)
                        ended = run.status if run.status in _ENDED else ""
            tg.cancel_scope.cancel()
    return status


def _nothing(event: Event) -> None:
    del event
