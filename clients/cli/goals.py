"""``loom goal "GOAL" --accept "criterion" ...``: work toward a goal over sessions, graded after each; ``loom goals``.

It drives the face through the client library, as every command does (the daemon's when one runs, else one in this
process): ``start_goal`` creates the goal's own session and answers at once; the command then follows that
session's stream, printing a line per work session, per verdict (with each criterion) and the end, then the report.
Exit 0 when the goal completed, 1 when it failed (its budget spent, with what is left), 130 when cancelled.

Ctrl-C (or SIGTERM) cancels the goal: its running work session or grader is cancelled and the goal recorded
``cancelled``. ``loom goal resume ID`` carries on a goal that nothing drives (its process died) and follows it.
``--detach`` prints the goal's id and leaves it running, which needs the daemon (``loom serve``): in
this process the goal would stop with the command. ``loom goal --show ID`` prints a goal's report, ``loom goal
cancel ID`` cancels it, ``loom goals`` lists them (id, status, attempts, spent of the budget, goal).
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
    from orchestrator.events import Event
    from orchestrator.protocol_long import GoalReport

__all__ = ["add_parsers", "goal_command", "goal_line", "goals_command", "report_text"]

_EXITS = {"completed": EXIT_OK, "cancelled": EXIT_CANCELLED}


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``goal`` and ``goals`` sub-commands' arguments."""
    cmd = sub.add_parser(
        "goal",
        help="work toward a goal over as many sessions as it takes; a grader child checks every criterion after each",
        description="Each work session is given the goal, the criteria and the last grader's findings; after it a "
        "grader child judges its evidence (files, command outputs, its summary) against every criterion. Ends "
        "completed (exit 0), failed when the budget is spent (exit 1, with what is left) or cancelled (130; "
        "Ctrl-C cancels it). Also: loom goal --show ID, loom goal cancel ID, loom goal resume ID.",
    )
    cmd.add_argument("words", nargs="*", metavar="GOAL", help='what to achieve (or "cancel ID", "resume ID")')
    cmd.add_argument(
        "--accept", action="append", default=[], metavar="CRITERION", help="an acceptance criterion (repeat it)"
    )
    cmd.add_argument(
        "--budget",
        default="",
        metavar="SPEC",
        help="sessions=N,steps=N,tokens=N,time=D (D like 90s, 30m, 2h); default sessions=5, the rest unbounded",
    )
    cmd.add_argument("--cwd", metavar="DIR", help="the directory the sessions work in (default: the current)")
    cmd.add_argument("--model", help="the work sessions' model, PROVIDER:NAME (the grader runs on its definition's)")
    cmd.add_argument(
        "--mode",
        choices=["ask", "accept-edits", "plan", "bypass"],
        default="accept-edits",
        help="the goal session's policy mode, bounding every child (default accept-edits); it is headless: a call "
        "policy would ask about is denied",
    )
    cmd.add_argument("--detach", action="store_true", help="print the goal's id and leave it running (the daemon)")
    cmd.add_argument("--show", metavar="ID", help="print a goal's report and exit")
    cmd.add_argument("--json", action="store_true", help="print the goal events as NDJSON, then the report as JSON")
    listing = sub.add_parser("goals", help="list goals: id, status, attempts, spent of the budget, goal")
    listing.add_argument("--json", action="store_true", help="print the goals as one JSON object")


def goal_line(event: Event, goal_id: str) -> list[str]:
    """The lines for a goal's event (none for any other event)."""
    from orchestrator.events_long import GoalFinished, GoalSessionStarted, GoalVerdict

    if getattr(event, "goal_id", None) != goal_id:
        return []
    if isinstance(event, GoalSessionStarted):
        via = f" (continues {event.handoff_from} from its handoff)" if event.handoff_from else ""
        return [f"session {event.attempt}: {event.child_session_id}{via}"]
    if isinstance(event, GoalVerdict):
        passed = sum(1 for c in event.criteria if c.passed)
        lines = [f"verdict {event.attempt}: {'passed' if event.passed else 'failed'} ({passed}/{len(event.criteria)})"]
        lines += [f"  [{'pass' if c.passed else 'FAIL'}] {c.criterion} - {c.reason}" for c in event.criteria]
        return lines
    if isinstance(event, GoalFinished):
        return [f"finished: {event.status} - {event.reason}"] + [f"  left: {item}" for item in event.left]
    return []


def report_text(report: GoalReport) -> str:
    """A goal's report as lines: id, status and reason, spent of the budget, each attempt, what is left."""
    from orchestrator.goals.budget import format_budget

    lines = [
        f"goal {report.goal_id}: {report.status}" + (f" - {report.reason}" if report.reason else ""),
        f"  {report.goal}",
        f"  spent: {format_budget(report.budget, report.spent)}",
        f"  session: {report.session_id}",
    ]
    lines += [f"  criterion {n}: {c}" for n, c in enumerate(report.criteria, 1)]
    for a in report.attempts:
        state = "grading" if a.passed is None else "passed" if a.passed else "failed"
        lines.append(f"  attempt {a.attempt}: {state} in {a.session_id}")
    lines += [f"  left: {item}" for item in report.left]
    return "\n".join(lines)


def goal_command(args: argparse.Namespace) -> int:
    """``loom goal ...``: returns the exit code."""
    from clients.cli.commands import quiet_logging
    from clients.cli.driving import fail, with_client
    from orchestrator.goals.budget import BudgetError, parse_budget

    quiet_logging()
    words: list[str] = args.words
    if args.show:
        if words:
            return fail("--show takes a goal id alone: loom goal --show ID")
        return with_client(lambda client: _show(client, args.show, args.json), shared=True)
    if len(words) == 2 and words[0] == "cancel" and not args.accept:
        return with_client(lambda client: _cancel(client, words[1]), shared=True)
    if len(words) == 2 and words[0] == "resume" and not args.accept:

        async def resumed(client: LoomClient) -> int:
            report = await client.resume_goal(words[1])
            after = (await client.get_session(report.session_id)).last_seq
            final, cancelled = await _follow(client, report, args.json, after=after)
            _print_report(final, args.json)
            return EXIT_CANCELLED if cancelled else _EXITS.get(final.status, EXIT_FAILED)

        return with_client(resumed, shared=True)
    if len(words) != 1 or not words[0].strip():
        return fail('give the goal as one quoted argument: loom goal "GOAL" --accept "criterion" ...')
    if not args.accept:
        return fail('a goal needs at least one acceptance criterion: --accept "..." (the grader checks each)')
    try:
        budget = parse_budget(args.budget)
    except BudgetError as exc:
        return fail(f"--budget: {exc}")
    cwd = Path(args.cwd).expanduser() if args.cwd else Path.cwd()
    if not cwd.is_dir():
        return fail(f"--cwd {cwd}: not a directory")
    cwd = cwd.resolve()

    async def main(client: LoomClient) -> int:
        if args.detach and not client.on_daemon:
            return fail("--detach needs the daemon (start it with loom serve): in this process the goal would stop")
        started = await client.start_goal(
            words[0], list(args.accept), budget=budget, cwd=str(cwd), mode=args.mode, model=args.model or ""
        )
        if args.detach:
            sys.stdout.write(started.goal_id + "\n")
            return EXIT_OK
        if not args.json:
            sys.stderr.write(f"loom: goal {started.goal_id} in session {started.session_id}\n")
        final, cancelled = await _follow(client, started, args.json)
        _print_report(final, args.json)
        return EXIT_CANCELLED if cancelled else _EXITS.get(final.status, EXIT_FAILED)

    return with_client(main, cwd=cwd, shared=True)


def goals_command(args: argparse.Namespace) -> int:
    """``loom goals``: list them; returns the exit code."""
    from clients.cli.commands import quiet_logging
    from clients.cli.driving import with_client
    from orchestrator.goals.budget import format_budget

    quiet_logging()

    async def main(client: LoomClient) -> int:
        goals = await client.list_goals()
        if args.json:
            sys.stdout.write(json.dumps({"goals": [g.model_dump(mode="json") for g in goals]}) + "\n")
            return EXIT_OK
        if not goals:
            sys.stdout.write('no goals yet; start one with loom goal "GOAL" --accept "criterion"\n')
            return EXIT_OK
        for g in goals:
            goal = " ".join(g.goal.split())
            goal = goal if len(goal) <= 60 else goal[:59] + "…"
            spent = format_budget(g.budget, g.spent)
            tries = f"{len(g.attempts)} attempt{'' if len(g.attempts) == 1 else 's'}"
            sys.stdout.write(f"{g.goal_id}  {g.status:<9}  {tries:<10}  {spent}  {goal}\n")
        return EXIT_OK

    return with_client(main, shared=True)


async def _show(client: LoomClient, goal_id: str, as_json: bool) -> int:
    report = await client.get_goal(goal_id)
    _print_report(report, as_json)
    return EXIT_OK


async def _cancel(client: LoomClient, goal_id: str) -> int:
    report = await client.cancel_goal(goal_id)
    sys.stdout.write(report_text(report) + "\n")
    return EXIT_OK


def _print_report(report: GoalReport, as_json: bool) -> None:
    if as_json:
        sys.stdout.write(json.dumps({"type": "goal_report", **report.model_dump(mode="json")}) + "\n")
    else:
        sys.stdout.write(report_text(report) + "\n")
    sys.stdout.flush()


async def _follow(client: LoomClient, started: GoalReport, as_json: bool, *, after: int = 0) -> tuple[GoalReport, bool]:
    """Print the goal's events after ``after`` until it ends; its report, and whether Ctrl-C (or SIGTERM) ended it."""
    goal_id = started.goal_id

    def line_of(event: Event) -> str | None:
        lines = goal_line(event, goal_id)
        return "\n".join(lines) if lines else None

    async def has_ended() -> bool:
        return (await client.get_goal(goal_id)).status != "running"

    cancelled = await follow_session(
        client,
        started.session_id,
        after,
        as_json=as_json,
        line_of=line_of,
        is_end=lambda e: e.type == "goal_finished" and getattr(e, "goal_id", None) == goal_id,
        has_ended=has_ended,
        cancel=lambda: client.cancel_goal(goal_id),
        what="the goal",
    )
    return await client.get_goal(goal_id), cancelled
