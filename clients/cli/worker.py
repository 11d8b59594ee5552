"""``loom worker`` (join the pool of DBOS workers and drive runs) and ``loom workers`` (list the pool).

Both need ``"engine": {"kind": "dbos", ...}`` in ``$LOOM_HOME/config.json``. ``loom worker`` runs the engine in this
process (:func:`orchestrator.engine.worker.run_worker`, as ``loom serve`` runs the daemon) until SIGTERM or Ctrl-C,
then leaves the pool cleanly: its row says ``stopped`` and no other worker takes anything over, unless the stop cut
runs short, which the next live worker then takes over at once.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from clients.cli.exits import EXIT_FAILED, EXIT_OK, EXIT_USAGE

if TYPE_CHECKING:
    from orchestrator.config import LoomConfig
    from orchestrator.engine.pool_listing import WorkerInfo

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,99}")


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``worker`` and ``workers`` sub-commands' arguments."""
    from clients.cli.main import _positive_int

    worker = sub.add_parser(
        "worker",
        help="join the pool of workers on the shared Postgres database (the dbos engine) and drive queued runs",
        description="Takes runs from the shared queue, with the same MCP servers, policy and config as any Loom "
        "process, and heartbeats into the database; when another worker falls silent, one live worker takes over "
        "its runs. Runs until SIGTERM or Ctrl-C, then leaves the pool cleanly (exit 0); runs it was driving then go to "
        "another worker at once.",
    )
    worker.add_argument(
        "--id", metavar="ID", help="this worker's name in the pool, kept across restarts (default: HOSTNAME-PID)"
    )
    worker.add_argument(
        "--concurrency",
        type=_positive_int,
        metavar="N",
        help="drive at most N runs at a time (default: engine.concurrency in the config, else 4)",
    )
    worker.add_argument("--config", metavar="FILE", help="extra config file (mcpServers) read after the others")
    workers = sub.add_parser("workers", help="list the pool's workers: host, pid, state, last heartbeat, takeovers")
    workers.add_argument("--json", action="store_true", help="print the workers as one JSON object")


def _fail(message: str, code: int = EXIT_USAGE) -> int:
    sys.stderr.write(f"loom: error: {message}\n")
    return code


def _needs_dbos(command: str) -> str:
    return (
        f'{command} needs the dbos engine: set "engine": {{"kind": "dbos", "database": "postgresql://…"}} '
        "in $LOOM_HOME/config.json"
    )


def _load(args: argparse.Namespace, command: str) -> tuple[LoomConfig, Path] | str:
    """The config and home, or the error to print."""
    from orchestrator.config import ConfigError, load_config, loom_home

    home = loom_home()
    try:
        extra = Path(args.config).expanduser() if getattr(args, "config", None) else None
        config = load_config(home, Path.cwd(), extra)
    except ConfigError as exc:
        return str(exc)
    if config.engine is None or not config.engine.distributed:
        return _needs_dbos(command)
    return config, home


def check_worker_id(worker_id: str) -> str | None:
    """Why ``worker_id`` cannot name a worker, or None when it can."""
    if _ID.fullmatch(worker_id):
        return None
    return (
        f"--id {worker_id!r} is not a worker name: use up to 100 letters, digits and . _ : @ -, "
        "starting with a letter or digit"
    )


def worker(args: argparse.Namespace) -> int:
    """``loom worker``: serve runs until SIGTERM or Ctrl-C; 0 after leaving the pool, 2 if it cannot start."""
    loaded = _load(args, "loom worker")
    if isinstance(loaded, str):
        return _fail(loaded)
    config, home = loaded
    from orchestrator.engine.settings import default_worker_id

    worker_id = args.id if args.id is not None else default_worker_id()
    problem = check_worker_id(worker_id)
    if problem is not None:
        return _fail(problem)
    for note in config.ignored:
        sys.stderr.write(f"loom: warning: {note}\n")
    level = os.environ.get("LOOM_LOG_LEVEL", "WARNING").upper()
    logging.basicConfig(level=level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")

    import anyio

    from orchestrator.engine.pool import PoolError, PoolUnreachable, WorkerIdInUse
    from orchestrator.engine.worker import run_worker
    from orchestrator.store.interface import StoreError

    def ready(line: str) -> None:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()

    async def until_signalled() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(_stop_on_signal, group.cancel_scope.cancel)
            await run_worker(config, home, worker_id=worker_id, concurrency=args.concurrency, ready=ready)
            group.cancel_scope.cancel()

    try:
        anyio.run(until_signalled)
    except BaseException as exc:  # the task groups wrap what the worker raised
        found = _first(exc, (PoolError, StoreError, OSError))
        if found is None:
            raise
        # Nothing ran (another name or the database's address is the fix), or the worker failed while serving.
        usage = isinstance(found, WorkerIdInUse | PoolUnreachable)
        return _fail(str(found), EXIT_USAGE if usage else EXIT_FAILED)
    return EXIT_OK


async def _stop_on_signal(stop: Callable[[], None]) -> None:
    import signal

    import anyio

    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for _ in signals:
            stop()  # the worker leaves the pool as its context closes: marked stopped, never taken over
            return


def _first(exc: BaseException, kinds: tuple[type[BaseException], ...]) -> BaseException | None:
    """``exc`` itself, or the first exception of ``kinds`` inside (nested) exception groups."""
    if isinstance(exc, kinds):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _first(inner, kinds)
            if found is not None:
                return found
    return None


def workers(args: argparse.Namespace) -> int:
    """``loom workers``: the pool's workers, newest first, as a table or (``--json``) one JSON object."""
    loaded = _load(args, "loom workers")
    if isinstance(loaded, str):
        return _fail(loaded)
    config, _ = loaded
    assert config.engine is not None

    import anyio

    from orchestrator.engine.pool import PoolError
    from orchestrator.engine.pool_listing import list_workers

    try:
        found = anyio.run(list_workers, config.engine.database)
    except PoolError as exc:
        return _fail(str(exc))
    if args.json:
        rows = [{**dataclasses.asdict(w), "started": w.started.isoformat()} for w in found]
        sys.stdout.write(json.dumps({"workers": rows}) + "\n")
        return EXIT_OK
    if not found:
        sys.stdout.write(f"no workers have joined the pool on {config.engine.shown_database} yet\n")
        return EXIT_OK
    sys.stdout.write(render_workers(found))
    return EXIT_OK


def render_workers(found: list[WorkerInfo]) -> str:
    """The workers as an aligned table, one line each."""
    header = ("ID", "HOST", "PID", "STATE", "LAST BEAT", "TAKEN OVER BY", "RUNS")
    rows = [
        (
            w.id,
            w.host,
            str(w.pid),
            w.state,
            f"{_age(w.beat_age_s)} ago",
            w.taken_over_by or "-",
            "-" if w.runs is None else str(w.runs),
        )
        for w in found
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in [header, *rows]]
    return "\n".join(lines) + "\n"


def _age(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    if seconds < 3600:
        return f"{seconds / 60:.0f}m"
    if seconds < 86400:
        return f"{seconds / 3600:.0f}h"
    return f"{seconds / 86400:.0f}d"
