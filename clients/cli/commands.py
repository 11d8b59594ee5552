"""The CLI commands that need the runtime: ``run``, ``export`` and ``runs``."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream

from clients.cli.errors import first_of
from clients.cli.exits import EXIT_CANCELLED, EXIT_FAILED, EXIT_OK, EXIT_USAGE
from clients.cli.render import JsonRenderer, TerminalRenderer
from clients.cli.trust import ask_to_trust
from orchestrator.config import ConfigError, LoomConfig, load_config, loom_home
from orchestrator.events import Event
from orchestrator.models import Model, ModelSpecError, default_model_spec, resolve_model
from orchestrator.policy.rules import PolicyError, Rule
from orchestrator.policy.trust import load_trusted_rules
from orchestrator.store.interface import StoreError

if TYPE_CHECKING:
    from orchestrator.store.eventlog import EventLog

DEMO_NOTICE = (
    "this run uses Loom's bundled scripted demo model: its words are pre-written, but every tool call "
    "is real and runs through Loom's fs and shell MCP servers. To use a real model, set ANTHROPIC_API_KEY "
    "(or pass --model anthropic:claude-sonnet-4-5), or pass --model openai:MODEL with OPENAI_BASE_URL and "
    "OPENAI_API_KEY for any OpenAI-compatible endpoint (DeepSeek, Kimi, Ollama, vLLM)."
)


def _fail(message: str, code: int = EXIT_USAGE) -> int:
    sys.stderr.write(f"loom: error: {message}\n")
    return code


def _quiet_logging() -> None:
    # MCPServer.__init__ calls logging.basicConfig; configuring first keeps library INFO logs off the terminal.
    level = os.environ.get("LOOM_LOG_LEVEL", "WARNING").upper()
    logging.basicConfig(level=level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")


def run(args: argparse.Namespace) -> int:
    """``loom run GOAL``: one headless session in the current directory."""
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
        spec = args.model or os.environ.get("LOOM_MODEL") or config.model or default_model_spec()
        model = resolve_model(spec, base_dir=cwd)
    except (ConfigError, ModelSpecError, PolicyError) as exc:
        return _fail(str(exc))
    notice = DEMO_NOTICE if spec == "scripted:demo" else ""
    if args.mode == "bypass":
        sys.stderr.write("loom: mode bypass: every tool call runs without asking (deny rules still apply)\n")
    renderer: Callable[[Event], None] = JsonRenderer() if args.json else TerminalRenderer()
    from orchestrator.daemon.discovery import read_discovery

    if read_discovery(home) is not None:  # a daemon runs: the run belongs there, visible to every client
        from clients.cli.remote import FaceError, run_on_daemon

        try:
            return anyio.run(run_on_daemon, spec, str(cwd), args.goal, args.max_steps, renderer, notice, args.mode)
        except (FaceError, BaseExceptionGroup) as exc:
            face_error = first_of(exc, FaceError)
            if face_error is None:
                raise
            return _fail(str(face_error), EXIT_FAILED)
    try:
        session = _SessionArgs(cwd, model, args.mode, rules, notice, tuple(rule_notes))
        return anyio.run(_run_session, home, config, session, args.goal, args.max_steps, renderer)
    except (StoreError, BaseExceptionGroup) as exc:
        # A StoreError raised during the run reaches us inside the task group's exception group.
        store_error = first_of(exc, StoreError)
        if store_error is None:
            raise
        return _fail(str(store_error), EXIT_FAILED)


@dataclass(frozen=True, slots=True)
class _SessionArgs:
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

    async with embedded_runtime(home, config=config) as runtime:

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
    with watcher, anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            run_scope.cancel()
            return


def export(run_id: str) -> int:
    """``loom export RUN``: the run's stored events as JSONL."""
    from orchestrator.runtime.embedded import find_run

    try:
        found = anyio.run(find_run, loom_home(), run_id)
    except StoreError as exc:
        return _fail(str(exc), EXIT_FAILED)
    if found is None:
        return _fail(f"no run {run_id!r} in {loom_home()}; `loom runs` lists them")
    for event in found[1]:
        sys.stdout.write(event.model_dump_json() + "\n")
    return EXIT_OK


def list_runs(limit: int) -> int:
    """``loom runs``: recent runs, newest first."""
    import time

    from orchestrator.runtime.embedded import recent_runs

    try:
        runs = anyio.run(recent_runs, loom_home(), limit)
    except StoreError as exc:
        return _fail(str(exc), EXIT_FAILED)
    for r in runs:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.started))
        reason = r.reason if r.status != "completed" else ""
        sys.stdout.write(f"{r.id}  {when}  {r.status:<10} {r.model:<32} {reason[:60]}\n")
    return EXIT_OK
