"""``loom orchestrate "goal"``: plan a goal as a task graph, run it with child sessions, print the outcome.

It drives the face through the client library, as every command does (the daemon's when one runs, else one in this
process): it creates the orchestrating session (headless, like ``loom run``) unless ``--session`` names one, starts
the orchestration with the face's ``orchestrate`` tool, follows the session's stream printing each task transition
as one line, then prints the report. Exit 0 when every task passed, 1 otherwise, 130 on Ctrl-C (which cancels the
orchestration, its children with it). With ``--json`` the transitions are NDJSON events and the report the last
line, ``{"type": "orchestration_report", ...}``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from clients.cli.exits import EXIT_CANCELLED, EXIT_FAILED, EXIT_OK
from clients.cli.following import follow_session

if TYPE_CHECKING:
    from clients.loom import LoomClient
    from orchestrator.agents.report import Report
    from orchestrator.events import Event

__all__ = ["add_parser", "orchestrate", "transition_line"]

_FINAL = ("passed", "failed", "cancelled")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``orchestrate`` sub-command's arguments."""
    from clients.cli.main import _positive_int

    cmd = sub.add_parser(
        "orchestrate",
        help="carry out a goal as a task graph: a planner child plans it, executors run it, a reviewer checks it",
        description="A planner child writes a task graph (tasks, dependencies, acceptance criteria); executor "
        "children run the ready tasks in parallel; a reviewer child checks each result and a failed review "
        "re-queues the task with its findings. Exit 0 when every task passed, 1 otherwise, 130 on Ctrl-C "
        "(the orchestration is cancelled).",
    )
    cmd.add_argument("goal", help="what to achieve")
    cmd.add_argument("--session", metavar="S", help="orchestrate in this session (default: a new headless one)")
    cmd.add_argument("--cwd", metavar="DIR", help="the new session works in this directory (default: the current)")
    cmd.add_argument("--model", help="the new session's model (the children run on their definitions' models, else it)")
    cmd.add_argument(
        "--mode",
        choices=["ask", "accept-edits", "plan", "bypass"],
        default="accept-edits",
        help="the new session's policy mode, which bounds every child (default accept-edits); it is headless: a "
        "call that policy would ask about is denied",
    )
    cmd.add_argument("--max-parallel", type=_positive_int, default=4, metavar="N", help="tasks at once (default 4)")
    cmd.add_argument(
        "--task-timeout", type=float, default=900.0, metavar="S", help="each child's run time, at most (default 900)"
    )
    cmd.add_argument(
        "--max-attempts", type=_positive_int, default=3, metavar="N", help="executor attempts per task (default 3)"
    )
    cmd.add_argument("--json", action="store_true", help="print the transitions as NDJSON, then the report as JSON")


def transition_line(event: Event, orchestration_id: str) -> str | None:
    """One line for an event of the orchestration's graph (None for any other event)."""
    from orchestrator.events import OrchestrationFinished, TaskGraphPlanned, TaskGraphPlanning, TaskStateChanged

    if getattr(event, "orchestration_id", None) != orchestration_id:
        return None
    if isinstance(event, TaskGraphPlanning) and event.child_run_id:
        return f"planning: planner {event.child_session_id} (attempt {event.attempt})"
    if isinstance(event, TaskGraphPlanned):
        return f"planned: {len(event.tasks)} task{'s' if len(event.tasks) != 1 else ''}: " + ", ".join(
            t.id for t in event.tasks
        )
    if isinstance(event, TaskStateChanged):
        if event.state in ("running", "reviewing") and not event.child_run_id:
            return None  # its child's session exists; the line comes once its run started
        line = f"task {event.task_id}: {event.state}"
        if event.attempt:
            line += f" (attempt {event.attempt})"
        if event.child_session_id:
            line += f" in {event.child_session_id}"
        if event.reason:
            line += f" - {' '.join(event.reason.split())[:200]}"
        return line
    if isinstance(event, OrchestrationFinished):
        return f"finished: {event.status}" + (f" - {event.reason}" if event.reason else "")
    return None


def orchestrate(args: argparse.Namespace) -> int:
    """``loom orchestrate GOAL``: returns the exit code."""
    from clients.cli.commands import quiet_logging
    from clients.cli.driving import fail, with_client
    from orchestrator.config import ConfigError, load_config, loom_home
    from orchestrator.models import choose_model_spec

    quiet_logging()
    if not args.task_timeout > 0:
        return fail(f"--task-timeout must be more than 0, not {args.task_timeout:g}")
    cwd = Path(args.cwd).expanduser() if args.cwd else Path.cwd()
    if not cwd.is_dir():
        return fail(f"--cwd {cwd}: not a directory")
    cwd = cwd.resolve()
    spec: str | None = None
    if args.session is None:
        try:
            spec = choose_model_spec(args.model, load_config(loom_home(), cwd, None).model)
        except ConfigError as exc:
            return fail(str(exc))

    async def main(client: LoomClient) -> int:
        session_id = args.session
        if session_id is None:
            session = await client.create_session(str(cwd), model=spec, mode=args.mode, headless=True)
            session_id, after = session.session_id, session.last_seq
        else:
            after = (await client.get_session(session_id)).last_seq
        started = await client.orchestrate(
            session_id,
            args.goal,
            max_parallel=args.max_parallel,
            task_timeout_s=args.task_timeout,
            max_attempts=args.max_attempts,
        )
        if not args.json:
            sys.stderr.write(f"loom: orchestration {started.orchestration_id} in session {session_id}\n")
        final, cancelled = await _follow(client, session_id, started.orchestration_id, after, args.json)
        if args.json:
            sys.stdout.write(json.dumps({"type": "orchestration_report", **final.model_dump(mode="json")}) + "\n")
        else:
            sys.stdout.write(final.text() + "\n")
        sys.stdout.flush()
        if cancelled:
            return EXIT_CANCELLED
        return EXIT_OK if final.status == "passed" else EXIT_FAILED

    return with_client(main, cwd=cwd, shared=True)


async def _follow(client: LoomClient, session_id: str, oid: str, after: int, as_json: bool) -> tuple[Report, bool]:
    """Print the orchestration's transitions until it ends; its report, and whether Ctrl-C (or SIGTERM) ended it."""

    async def has_ended() -> bool:
        return (await client.get_orchestration(session_id, oid)).status in _FINAL

    cancelled = await follow_session(
        client,
        session_id,
        after,
        as_json=as_json,
        line_of=lambda e: transition_line(e, oid),
        is_end=lambda e: getattr(e, "orchestration_id", None) == oid and e.type == "orchestration_finished",
        has_ended=has_ended,
        cancel=lambda: client.cancel_orchestration(session_id, oid, reason="cancelled from loom orchestrate (Ctrl-C)"),
        what="the orchestration",
    )
    return await client.get_orchestration(session_id, oid), cancelled
