"""``loom handoff`` and ``loom memory archive``: end a session by handing it off to a fresh one; carry its notes over.

Both go through the face like every command (the daemon's when one runs, else one in this process). ``loom handoff
SESSION`` has the session's model write the handoff (checked, retried once), starts the fresh session from it,
archives the old one and prints the new session's id; ``loom handoff --show SESSION`` prints a handoff (old or new
session's id). ``loom memory archive SESSION`` promotes the notes a session saved in its session namespace to its
project. A session may be named by a unique prefix of its id.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from clients.cli.exits import EXIT_FAILED, EXIT_OK

if TYPE_CHECKING:
    from clients.loom import LoomClient
    from orchestrator.protocol_long import HandoffReport, MemoryArchiveInfo

__all__ = ["add_parsers", "handoff_command", "memory_command"]

_NOT_WRITTEN = "no handoff was written"
"""How the face's refusal of a handoff the model could not write (model error, checks failed twice) begins."""


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``handoff`` and ``memory`` sub-commands' arguments."""
    cmd = sub.add_parser(
        "handoff",
        help="end a session by handing it off to a fresh one that starts from a written, checked handoff",
        description="The session's model writes a handoff in fixed blocks (goal and constraints, decisions, state of "
        "files and systems, work done with evidence, open items, next step, warnings), checked like a compaction "
        "summary: every block there, every instruction you gave quoted verbatim. A fresh session with the same "
        "directory, mode, model and rules then starts from it, and the old session is archived (kept, readable). "
        "The session's notes move to the project's memory unless --keep-memory. Exit 0 done, 1 the model could not "
        "write a handoff that passes the checks (nothing changed), 2 refused (unknown or busy session).",
    )
    cmd.add_argument("session", help="the session (its id, or a unique prefix of it)")
    cmd.add_argument("--instructions", default="", metavar="TEXT", help="extra text for the fresh session, verbatim")
    cmd.add_argument(
        "--keep-memory", action="store_true", help="leave the session's notes in its own namespace (not promoted)"
    )
    cmd.add_argument("--show", action="store_true", help="print the handoff SESSION wrote or started from, and stop")
    cmd.add_argument("--json", action="store_true", help="print the result as one JSON object")

    memory = sub.add_parser("memory", help="a session's memory notes: `loom memory archive SESSION`")
    actions = memory.add_subparsers(dest="memory_action", metavar="{archive}", required=True)
    archive = actions.add_parser(
        "archive",
        help="promote the notes a session saved in its session namespace to its project's namespace",
        description="Copies the session's notes to the project namespace, so later sessions of the project start "
        "with them. No project note is overwritten: a different one of the same key is kept and the session's goes "
        "beside it under KEY.SESSION. Running it again promotes nothing twice.",
    )
    archive.add_argument("session", help="the session (its id, or a unique prefix of it; archived sessions too)")
    archive.add_argument("--json", action="store_true", help="print the result as one JSON object")


async def _resolve(client: LoomClient, given: str) -> str:
    """``given`` itself, or the one session (archived ones too) whose id it begins; the face reports the rest."""
    ids = [s.session_id for s in await client.list_sessions(include_archived=True)]
    if given in ids:
        return given
    matches = [i for i in ids if i.startswith(given)]
    if len(matches) > 1:
        from clients.loom import FaceError

        shown = ", ".join(matches[:5]) + (" ..." if len(matches) > 5 else "")
        raise FaceError(f"{given!r} is the start of {len(matches)} sessions ({shown}); give more of the id", "")
    return matches[0] if matches else given


def handoff_command(args: argparse.Namespace) -> int:
    """``loom handoff SESSION [--instructions TEXT] [--keep-memory]`` or ``loom handoff --show SESSION``."""
    from clients.cli.commands import quiet_logging
    from clients.cli.driving import fail, with_client
    from clients.loom import FaceError

    quiet_logging()
    if args.show and (args.instructions or args.keep_memory):
        return fail("--show only prints a handoff: leave out --instructions and --keep-memory")

    async def main(client: LoomClient) -> int:
        session_id = await _resolve(client, args.session)
        if args.show:
            shown = await client.get_handoff(session_id)
            if args.json:
                sys.stdout.write(shown.model_dump_json() + "\n")
            else:
                sys.stdout.write(describe_handoff(shown, shown_for=session_id) + "\n\n" + shown.text.rstrip() + "\n")
            return EXIT_OK
        try:
            done = await client.handoff_session(session_id, args.instructions, keep_memory=args.keep_memory)
        except FaceError as exc:
            if str(exc).startswith(_NOT_WRITTEN):
                return fail(str(exc), EXIT_FAILED)
            raise
        if args.json:
            sys.stdout.write(done.model_dump_json() + "\n")
            return EXIT_OK
        sys.stdout.write(done.new_session_id + "\n")
        sys.stderr.write(describe_handoff(done) + "\n")
        sys.stderr.write(f"loom: read the handoff with: loom handoff --show {done.new_session_id}\n")
        if done.memory is not None:
            sys.stderr.write(f"loom: memory: {describe_archive(done.memory)}\n")
        elif done.memory_error:
            sys.stderr.write(f"loom: memory: not promoted: {done.memory_error}; `loom memory archive` retries\n")
        return EXIT_OK

    return with_client(main)


def memory_command(args: argparse.Namespace) -> int:
    """``loom memory archive SESSION``."""
    from clients.cli.commands import quiet_logging
    from clients.cli.driving import with_client

    quiet_logging()

    async def main(client: LoomClient) -> int:
        done = await client.archive_memory(await _resolve(client, args.session))
        if args.json:
            sys.stdout.write(done.model_dump_json() + "\n")
        else:
            sys.stdout.write(describe_archive(done) + "\n")
        return EXIT_OK

    return with_client(main)


def describe_handoff(report: HandoffReport, *, shown_for: str = "") -> str:
    """One line: which session continues which, and how the handoff was written."""
    tries = f"{report.attempts} attempt{'s' if report.attempts != 1 else ''}"
    line = f"loom: session {report.new_session_id} continues {report.session_id} from its handoff"
    line += f" (written in {tries}; {report.session_id} archived"
    if report.instructions:
        line += f"; {len(report.instructions)} instruction{'s' if len(report.instructions) != 1 else ''} carried"
    line += ")"
    if shown_for:
        return line.removeprefix("loom: ")
    return line


def describe_archive(info: MemoryArchiveInfo) -> str:
    """What promoting a session's notes did, in one line."""
    if not (info.keys or info.unchanged or info.skipped):
        return f"session {info.session_id} has no notes of its own; nothing to promote"
    parts = []
    if info.keys:
        parts.append(f"promoted {len(info.keys)} note{'s' if len(info.keys) != 1 else ''} to the project: ")
        parts[-1] += ", ".join(info.keys)
    if info.renamed:
        parts.append(
            "kept beside a different project note: " + ", ".join(f"{a} -> {b}" for a, b in info.renamed.items())
        )
    if info.unchanged:
        parts.append(f"already in the project: {', '.join(info.unchanged)}")
    if info.skipped:
        parts.append(
            f"skipped {len(info.skipped)}: {'; '.join(json.dumps(s, ensure_ascii=False) for s in info.skipped)}"
        )
    return "; ".join(parts)
