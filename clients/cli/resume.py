"""``loom resume RUN``: continue an interrupted run under its own id, without a new message.

When a daemon runs for ``$LOOM_HOME`` the run is resumed there (through the face's ``resume_run``),
so every attached client sees it and can answer a review (``loom approve`` / ``loom deny``).
Otherwise it is resumed in this process, headless like ``loom run``: a call that would need a
review ends the run ``needs_review`` with nothing run again. Either way the run's events are
rendered as ``loom run`` renders them (``--json``: NDJSON).
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable
from pathlib import Path

import anyio

from clients.cli.errors import first_of
from clients.cli.exits import EXIT_CANCELLED, EXIT_FAILED, EXIT_OK, EXIT_USAGE
from clients.cli.render import JsonRenderer, TerminalRenderer
from orchestrator.config import ConfigError, load_config, loom_home
from orchestrator.events import EVENT_ADAPTER, ApprovalRequested, Event, RunFinished, RunResumed
from orchestrator.store.interface import StoreError

EXIT_CODES = {"completed": EXIT_OK, "cancelled": EXIT_CANCELLED}


class ResumeFailed(Exception):
    """The run cannot be resumed; the message says why."""


def resume(args: argparse.Namespace) -> int:
    """``loom resume RUN [--json]``: exit 0 when the run completes, 130 cancelled, 1 otherwise."""
    from clients.cli.commands import _quiet_logging
    from orchestrator.daemon.discovery import read_discovery

    _quiet_logging()
    render: Callable[[Event], None] = JsonRenderer() if args.json else TerminalRenderer()

    def renderer(event: Event) -> None:
        render(event)
        _hint(event)

    home = loom_home()
    try:
        if read_discovery(home) is not None:
            return anyio.run(_on_daemon, home, args.run_id, renderer)
        return anyio.run(_embedded, home, args.run_id, renderer)
    except (ResumeFailed, StoreError, ConfigError, BaseExceptionGroup) as exc:
        from clients.cli.remote import FaceError
        from orchestrator.loop.resume import ResumeError

        kinds: tuple[type[Exception], ...] = (ResumeFailed, ResumeError, FaceError, StoreError, ConfigError)
        error = next((e for e in (first_of(exc, k) for k in kinds) if e is not None), None)
        if error is None:
            raise
        sys.stderr.write(f"loom: error: {error}\n")
        return EXIT_FAILED if isinstance(error, StoreError) else EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_CANCELLED


def _hint(event: Event) -> None:
    """What the resume did and what it waits for, on stderr."""
    if isinstance(event, RunResumed):
        done = [
            f"{label} {', '.join(ids)}"
            for label, ids in (
                ("reused", event.reused),
                ("running again", event.rerun),
                ("needs review", event.review),
                ("asking policy again", event.unstarted),
            )
            if ids
        ]
        summary = f": {'; '.join(done)}" if done else ""
        sys.stderr.write(f"loom: resumed run {event.run_id} after step {event.after_step}{summary}\n")
    elif isinstance(event, ApprovalRequested):
        what = "review" if event.kind == "review" else "approval"
        sys.stderr.write(
            f"loom: {what} needed for {event.tool}: loom approve {event.approval_id} / loom deny {event.approval_id}\n"
        )


async def _on_daemon(home: Path, run_id: str, renderer: Callable[[Event], None]) -> int:
    """Resume on the daemon and follow the session's events until the run ends; Ctrl-C cancels it there."""
    from clients.cli.remote import FaceError, call
    from orchestrator.daemon.client import connect

    async with connect(home) as client:
        try:
            before = await call(client, "get_run", run_id=run_id)
            cursor = (await call(client, "get_session", session_id=before["session_id"]))["last_seq"]
            run = await call(client, "resume_run", run_id=run_id)
        except FaceError as exc:
            raise ResumeFailed(str(exc)) from exc
        sid = run["session_id"]
        sys.stderr.write(f"loom: resuming run {run_id} in session {sid}\n")
        status = run["status"]
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with anyio.create_task_group() as tg:

                async def cancel_on_signal() -> None:
                    async for _ in signals:
                        await call(client, "cancel_run", run_id=run_id)
                        return

                tg.start_soon(cancel_on_signal)
                ended = False
                while not ended:
                    page = await call(client, "read_events", session_id=sid, after_seq=cursor, wait_s=30)
                    for raw in page["events"]:
                        event = EVENT_ADAPTER.validate_python(raw)
                        renderer(event)
                        if isinstance(event, RunFinished) and event.run_id == run_id:
                            status, ended = event.status, True
                    cursor = page["next_after_seq"]
                tg.cancel_scope.cancel()
    return EXIT_CODES.get(status, EXIT_FAILED)


async def _embedded(home: Path, run_id: str, renderer: Callable[[Event], None]) -> int:
    """Resume in this process, headless: runs left running by a dead process are marked interrupted first."""
    from clients.cli.commands import drive_rendered
    from orchestrator.home import DB_NAME
    from orchestrator.loop.resume import RESUMABLE
    from orchestrator.models import ModelSpecError, resolve_model
    from orchestrator.policy.rules import PolicyError
    from orchestrator.policy.trust import load_trusted_rules
    from orchestrator.runtime.embedded import embedded_runtime

    if not await anyio.Path(home / DB_NAME).is_file():
        raise ResumeFailed(f"no run {run_id!r} in {home}; `loom runs` lists them")
    config = load_config(home, Path.cwd())
    async with embedded_runtime(home, config=config) as runtime:
        await runtime.mark_interrupted()
        store = runtime.log.store
        record = await store.get_run(run_id)
        session_record = await store.get_session(record.session_id) if record is not None else None
        if record is None or session_record is None:
            raise ResumeFailed(f"no run {run_id!r} in {home}; `loom runs` lists them")
        if record.status not in RESUMABLE:
            raise ResumeFailed(f"run {run_id} is {record.status}; only an interrupted run can be resumed")
        cwd = Path(session_record.cwd)
        if not await anyio.Path(cwd).is_dir():
            raise ResumeFailed(f"run {run_id} worked in {cwd}, which no longer exists")
        try:
            model = resolve_model(session_record.model, base_dir=cwd)
            rules, warnings = load_trusted_rules(home, cwd)
        except (ModelSpecError, ValueError, PolicyError) as exc:
            raise ResumeFailed(f"cannot resume run {run_id}: {exc}") from exc

        async def drive() -> str:
            opened = runtime.open_session(
                cwd,
                model,
                mode=session_record.mode,
                session_id=session_record.id,
                headless=True,
                rules=rules,
                warnings=warnings,
            )
            async with opened as session:  # a ResumeError reaches resume() inside exception groups
                return (await session.resume(run_id)).status

        status = await drive_rendered(runtime.log, renderer, drive)
    if status == "needs_review":
        sys.stderr.write("loom: nothing was run again; resume it with the daemon running to review the call\n")
    return EXIT_CODES.get(status, EXIT_FAILED)
