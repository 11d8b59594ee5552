"""``loom review [--session S] [--run RUN_ID] [TARGET]``: a reviewer child's verdict on a change, through the face.

The face's ``review`` tool starts the reviewer and ``review_result`` waits for it, in bounded long-polls, so the
command works the same on a daemon and in-process. Findings print one per line as ``path:line: severity:
message`` (the form editors and ``grep -n`` use); the exit code is the verdict: 0 pass (or nothing to review), 1
changes needed, 2 when there was no verdict (no git repository, a reviewer that failed, a bad target).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from clients.cli.driving import with_client
from clients.cli.exits import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from clients.loom import LoomClient
from orchestrator.protocol_review import ReviewFinding, ReviewInfo

__all__ = ["finding_line", "review"]

POLL_S = 30.0
"""One ``review_result`` long-poll (the face bounds each call)."""


def finding_line(finding: ReviewFinding) -> str:
    """A finding as ``path:line: severity: message`` (``path: ...`` with no line, ``severity: ...`` with no file)."""
    place = (
        f"{finding.file}:{finding.line}: "
        if finding.file and finding.line
        else f"{finding.file}: "
        if finding.file
        else ""
    )
    return f"{place}{finding.severity}: {finding.message}"


def _show(done: ReviewInfo) -> None:
    if done.status == "nothing_to_review":
        sys.stdout.write(f"{done.detail}\n")
        return
    for finding in done.findings:
        sys.stdout.write(finding_line(finding) + "\n")
    if done.status == "reviewed":
        errors = sum(f.severity == "error" for f in done.findings)
        verdict = "pass" if done.verdict == "pass" else "changes needed"
        counted = f"{len(done.findings)} finding{'s' if len(done.findings) != 1 else ''}"
        sys.stdout.write(f"review of {done.target}: {verdict} ({counted}, {errors} must be fixed)\n")
        if done.detail:
            sys.stdout.write(f"{done.detail}\n")
    sys.stderr.write(f"loom: the reviewer's session is {done.reviewer_session_id} (`loom attach` shows its work)\n")


def review(args: argparse.Namespace) -> int:
    """``loom review``: start a reviewer, wait for its verdict, print its findings; the exit code is the verdict."""
    where = Path(os.path.abspath(args.cwd)) if args.cwd else Path.cwd()

    async def main(client: LoomClient) -> int:
        arguments: dict[str, object] = {"target": args.target, "model": args.model, "wait_s": POLL_S}
        if args.session:
            arguments["session_id"] = args.session
        if args.cwd or not args.session:
            arguments["cwd"] = str(where)
        if args.run:
            arguments["run_id"] = args.run
        done = await client.call("review", ReviewInfo, **arguments)
        told = False
        while done.status == "running":
            if done.run_status == "awaiting_approval" and not told:
                sys.stderr.write("loom: the reviewer waits for an approval (`loom approvals` lists it)\n")
                told = True
            done = await client.call("review_result", ReviewInfo, run_id=done.run_id, wait_s=POLL_S)
        if args.json:
            sys.stdout.write(done.model_dump_json() + "\n")
        else:
            _show(done)
        if done.status == "failed":
            sys.stderr.write(f"loom: error: no verdict: {done.detail}\n")
            return EXIT_USAGE
        return EXIT_FAILED if done.verdict == "changes_needed" else EXIT_OK

    return with_client(main, cwd=where)
