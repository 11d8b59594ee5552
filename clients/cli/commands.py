"""The CLI commands that need the runtime or the store: ``run``, ``export`` and ``runs``.

Only the standard library is imported at module level: ``loom runs`` lists from the database in a few
tens of milliseconds (:mod:`clients.cli.peek`) and must not pay for the runtime that ``loom run`` loads.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from clients.cli.exits import EXIT_CANCELLED, EXIT_FAILED, EXIT_OK, EXIT_USAGE

if TYPE_CHECKING:
    import anyio
    from anyio.streams.memory import MemoryObjectReceiveStream

    from clients.cli.peek import RunRow
    from orchestrator.config import LoomConfig
    from orchestrator.events import Event
    from orchestrator.models import Model
    from orchestrator.policy.rules import Rule
    from orchestrator.store.eventlog import EventLog


def _fail(message: str, code: int = EXIT_USAGE) -> int:
    sys.stderr.write(f"loom: error: {message}\n")
    return code


def _quiet_logging() -> None:
    import logging

    # MCPServer.__init__ calls logging.basicConfig; configuring first keeps library INFO logs off the terminal.
    level = os.environ.get("LOOM_LOG_LEVEL", "WARNING").upper()
    logging.basicConfig(level=level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")


def run(args: argparse.Namespace) -> int:
    """``loom run GOAL``: one headless session in the current directory."""
    import anyio

    from clients.cli.errors import cli_message, first_of
    from clients.cli.render import JsonRenderer, TerminalRenderer
    from clients.cli.trust import ask_to_trust
    from orchestrator.config import ConfigError, load_config, loom_home
    from orchestrator.daemon.discovery import read_discovery
    from orchestrator.models import DEMO_NOTICE, DEMO_SPEC, ModelSpecError, choose_model_spec, resolve_model
    from orchestrator.models.credentials import missing_credentials
    from orchestrator.policy.rules import PolicyError
    from orchestrator.policy.trust import load_trusted_rules
    from orchestrator.runtime.lock import HomeInUse
    from orchestrator.store.interface import StoreError

    _quiet_logging()
    cwd = Path(args.cwd).expanduser() if args.cwd else Path.cwd()
    if not cwd.is_dir():
        return _fail(f"--cwd {cwd}: not a directory")
    cwd = cwd.resolve()
    home = loom_home()
    extra = Path(args.config).expanduser() if args.config else None
    try:
        config = load_config(home, cwd, extra)
        # A bad policy file is a usage error, before anything runs; the session loads the rules itself.
        rules, rule_notes = load_trusted_rules(home, cwd)
        if ask_to_trust(home, cwd, [*config.ignored, *rule_notes]):  # at a terminal only
            config = load_config(home, cwd, extra)
            rules, rule_notes = load_trusted_rules(home, cwd)
        spec = choose_model_spec(args.model, config.model)  # the face's create_session follows it too
        model = resolve_model(spec, base_dir=cwd)
    except (ConfigError, ModelSpecError, PolicyError) as exc:
        return _fail(str(exc))
    on_daemon = read_discovery(home) is not None
    # Without a daemon this process makes the model calls, so its environment decides: a missing key is a
    # usage error, reported before a run is recorded. A daemon's environment is its own; it reports there.
    problem = None if on_daemon else missing_credentials(model)
    if problem is not None:
        return _fail(f"{problem}; or choose another model with --model")
    notice = DEMO_NOTICE if spec == DEMO_SPEC else ""
    if args.mode == "bypass":
        sys.stderr.write("loom: mode bypass: every tool call runs without asking (deny rules still apply)\n")
    renderer: Callable[[Event], None] = JsonRenderer() if args.json else TerminalRenderer()
    if on_daemon:  # a daemon runs: the run belongs there, visible to every client
        from clients.cli.remote import FaceError, run_on_daemon

        try:
            return anyio.run(run_on_daemon, spec, str(cwd), args.goal, args.max_steps, renderer, notice, args.mode)
        except (FaceError, BaseExceptionGroup) as exc:
            face_error = first_of(exc, FaceError)
            if face_error is None:
                raise
            return _fail(cli_message(str(face_error)), EXIT_FAILED)
    try:
        session = _SessionArgs(cwd, model, args.mode, rules, notice, tuple(rule_notes))
        return anyio.run(_run_session, home, config, session, args.goal, args.max_steps, renderer)
    except (StoreError, BaseExceptionGroup) as exc:
        # A StoreError raised during the run reaches us inside the task group's exception group.
        store_error = first_of(exc, StoreError)
        if store_error is None:
            raise
        # Another process runs sessions on the home: a usage error (start `loom serve`, the message says).
        return _fail(str(store_error), EXIT_USAGE if isinstance(store_error, HomeInUse) else EXIT_FAILED)


class _SessionArgs(NamedTuple):
    cwd: Path
    model: Model
    mode: str
    rules: Sequence[Rule]
    notice: str
    warnings: tuple[str, ...] = ()


async def _run_session(
    home: Path,
    config: LoomConfig,
    session_args: _SessionArgs,
    goal: str,
    max_steps: int,
    renderer: Callable[[Event], None],
) -> int:
    from orchestrator.runtime.embedded import embedded_runtime

    # Shared: this run writes only the session it creates, so other `loom run`s may go on beside it.
    async with embedded_runtime(home, config=config, shared=True) as runtime:

        async def drive() -> str:
            opened = runtime.open_session(
                session_args.cwd,
                session_args.model,
                notice=session_args.notice,
                mode=session_args.mode,
                headless=True,
                rules=session_args.rules,
                warnings=session_args.warnings,
            )
            async with opened as session:
                return (await session.run(goal, max_steps=max_steps)).status

        status = await drive_rendered(runtime.log, renderer, drive)
    return {"completed": EXIT_OK, "cancelled": EXIT_CANCELLED}.get(status, EXIT_FAILED)


async def drive_rendered(log: EventLog, renderer: Callable[[Event], None], drive: Callable[[], Awaitable[str]]) -> str:
    """Run ``drive`` (it returns the run's final status) while ``renderer`` shows the log's events.

    Ctrl-C, SIGTERM or a closed stdout cancel it; the status is then ``cancelled``.
    """
    import anyio

    status = "failed"
    async with log.subscribe() as events, anyio.create_task_group() as tg:
        run_scope = anyio.CancelScope()
        tg.start_soon(_render, events, renderer, run_scope)
        with run_scope:
            watcher = anyio.CancelScope()
            tg.start_soon(_cancel_on_signal, run_scope, watcher)
            try:
                status = await drive()
            finally:
                watcher.cancel()
        if run_scope.cancelled_caught:
            status = "cancelled"
        log.close_subscribers()
    return status


async def _render(
    events: MemoryObjectReceiveStream[Event], renderer: Callable[[Event], None], run_scope: anyio.CancelScope
) -> None:
    async for event in events:
        try:
            renderer(event)
        except BrokenPipeError:
            # Whoever read our output is gone (``loom run ... | head``): stop the run as Ctrl-C would,
            # rather than crash with a traceback or keep an agent working that nobody watches.
            _discard_stdout()
            sys.stderr.write("loom: stdout was closed; cancelling the run\n")
            run_scope.cancel()
            return


def _discard_stdout() -> None:
    # Point fd 1 at /dev/null so that flushing what is still buffered (now, or at exit) cannot fail again.
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)


async def _cancel_on_signal(run_scope: anyio.CancelScope, watcher: anyio.CancelScope) -> None:
    import anyio

    with watcher, anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            run_scope.cancel()
            return


def export(run_id: str) -> int:
    """``loom export RUN``: the run's stored events as JSONL (RUN may be a unique prefix of the id)."""
    from clients.cli import peek
    from orchestrator.events import EVENT_ADAPTER
    from orchestrator.home import loom_home

    home = loom_home()
    events: list[Event] | None
    try:
        found = peek.find_run(home, run_id)
        bodies = peek.session_events(home, found.session_id, found.id) if found is not None else None
        events = [EVENT_ADAPTER.validate_json(body) for body in bodies] if bodies is not None else None
    except peek.Unreadable:  # not a file the peek reads: ask the checkpoints server
        import anyio

        from orchestrator.runtime.embedded import find_run
        from orchestrator.store.interface import StoreError

        try:
            stored = anyio.run(find_run, home, run_id)
        except StoreError as exc:
            return _fail(str(exc), EXIT_FAILED)
        events = stored[1] if stored is not None else None
    if events is None:
        return _fail(f"no run {run_id!r} in {home}; `loom runs` lists them")
    return write_out("".join(event.model_dump_json() + "\n" for event in events))


def list_runs(limit: int) -> int:
    """``loom runs``: recent runs, newest first, under a header line."""
    from clients.cli import peek
    from orchestrator.home import loom_home

    home = loom_home()
    try:
        runs = peek.recent_runs(home, limit)
    except peek.Unreadable:  # not a file the peek reads: ask the checkpoints server (it migrates, or says why not)
        import anyio

        from orchestrator.runtime.embedded import recent_runs
        from orchestrator.store.interface import StoreError

        try:
            records = anyio.run(recent_runs, home, limit)
        except StoreError as exc:
            return _fail(str(exc), EXIT_FAILED)
        runs = [
            peek.RunRow(r.id, r.session_id, r.started, r.finished, r.status, r.reason, r.model, r.owner)
            for r in records
        ]
    if not runs:
        sys.stderr.write(f"loom: no runs yet in {home}\n")
        return EXIT_OK
    return write_out(runs_table(runs))


_REASON_WIDTH = 80


def runs_table(runs: Sequence[RunRow]) -> str:
    """The ``loom runs`` listing: a header line, then one aligned line per run.

    A reason longer than the column is cut with a visible ``…``; ``loom trace RUN`` shows it whole.
    """
    import time

    rows = [("RUN", "STARTED", "STATUS", "MODEL", "REASON")]
    for r in runs:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.started))
        status = r.shown_status
        reason = " ".join(r.shown_reason.split()) if status != "completed" else ""
        if len(reason) > _REASON_WIDTH:
            reason = reason[: _REASON_WIDTH - 1] + "…"
        rows.append((r.id, when, status, r.model, reason))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)] + [0]
    lines = ("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows)
    return "".join(line + "\n" for line in lines)


def write_out(text: str) -> int:
    """Write ``text`` to stdout; a reader that stopped early (``loom runs | head -1``) is no error: ``EXIT_OK``."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        _discard_stdout()
    return EXIT_OK
