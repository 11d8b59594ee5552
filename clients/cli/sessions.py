"""The CLI's session commands: ``sessions``, ``send``, ``attach``, ``approvals``, ``approve``, ``deny``.

Each goes through Loom's client library (:mod:`clients.loom`): to the daemon when one runs for
``$LOOM_HOME``, so it sees the sessions every other client sees, and otherwise to a face in this process,
through the very same MCP tools. ``loom sessions`` without a daemon reads the list from the database
itself (:mod:`orchestrator.store.peek`), in tens of milliseconds rather than the second the SDK takes to
import; everything else is imported when a command runs, for the same reason.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from clients.cli.exits import EXIT_FAILED, EXIT_OK, EXIT_USAGE

if TYPE_CHECKING:
    from clients.loom import LoomClient
    from orchestrator.protocol import SessionInfo
    from orchestrator.store.peek import SessionRow

__all__ = ["approvals", "attach", "decide", "send", "sessions"]


def sessions(args: argparse.Namespace) -> int:
    """``loom sessions``: the sessions every client sees (``rename`` / ``archive`` change one)."""
    action = getattr(args, "sessions_action", None)
    if action is not None:
        return _change_session(args.session, action, getattr(args, "title", ""))
    from orchestrator.daemon.discovery import read_discovery
    from orchestrator.home import loom_home
    from orchestrator.store import peek

    home = loom_home()
    if read_discovery(home) is None:  # nobody else holds a run's state: the store says it all
        try:
            return _list_sessions(peek.recent_sessions(home, include_archived=args.all))
        except peek.Unreadable:
            pass  # not a file the peek reads: the face's store migrates it, or says why not
    from clients.cli.driving import with_client

    async def main(client: LoomClient) -> int:
        return _list_sessions(await client.list_sessions(include_archived=args.all))

    return with_client(main)


def _change_session(session_id: str, action: str, title: str) -> int:
    from clients.cli.driving import with_client
    from orchestrator.store.session_view import clean_title

    async def main(client: LoomClient) -> int:
        if action == "rename":
            done = await client.rename_session(session_id, title)
            shown = f"titled {clean_title(done.title)!r}" if done.title else "untitled"
            sys.stderr.write(f"loom: session {done.session_id} is now {shown}\n")
        else:
            done = await client.archive_session(session_id)
            sys.stderr.write(f"loom: session {done.session_id} archived (`loom sessions --all` still lists it)\n")
        return EXIT_OK

    return with_client(main)


def _list_sessions(rows: Sequence[SessionInfo | SessionRow]) -> int:
    from clients.cli.output import write_out
    from orchestrator.store.session_view import clean_title

    if not rows:
        return write_out("no sessions\n")
    columns = _SESSION_COLUMNS
    tree = _as_tree(rows)
    rows = [s for s, _ in tree]
    ids = [guide + s.session_id for s, guide in tree]
    # Cleaned again here: whoever wrote the store, an escape sequence in a title never reaches the terminal.
    titles = [_cut(_title_of(s, clean_title), TITLE_CELL) for s in rows]
    titled = any(titles)
    # Columns as wide as their widest cell, so that a long mode (accept-edits) or model keeps them aligned.
    wide = [max(len(head), *(len(getattr(s, key)) for s in rows)) for key, head in columns]
    wide[0] = max(wide[0], *map(len, ids))
    if titled:
        wide.append(max(len("TITLE"), *map(len, titles)))
    head = [name for _, name in columns] + (["TITLE"] if titled else [])
    lines = [_session_line(head[:-1] if titled else head, wide, "CTX", "CWD", head[-1] if titled else None)]
    for s, title, shown_id in zip(rows, titles, ids, strict=True):
        flag = " (archived)" if s.archived else ""
        context = f"{s.context_ratio:.0%}" if s.context_ratio is not None else "-"
        cells = [getattr(s, key) for key, _ in columns]
        cells[0] = shown_id
        lines.append(_session_line(cells, wide, context, f"{s.cwd}{flag}", title if titled else None))
    return write_out("".join(lines))


def _as_tree(rows: Sequence[SessionInfo | SessionRow]) -> list[tuple[SessionInfo | SessionRow, str]]:
    """The rows with each child right under the session that started it (in the order started), and its guide.

    The list stays newest first at the top level; a child whose parent is not listed stays at the top level.
    """
    listed = {s.session_id for s in rows}
    kids: dict[str, list[SessionInfo | SessionRow]] = {}
    for s in reversed(rows):  # oldest first: children in the order they were started
        parent = getattr(s, "parent_session_id", "")  # a peek row (no daemon) predates the tree: flat
        if parent and parent in listed and parent != s.session_id:
            kids.setdefault(parent, []).append(s)
    out: list[tuple[SessionInfo | SessionRow, str]] = []
    seen: set[str] = set()

    def walk(s: SessionInfo | SessionRow, guide: str, depth: int) -> None:
        seen.add(s.session_id)
        out.append((s, guide))
        for kid in kids.get(s.session_id, []):
            if kid.session_id not in seen:
                walk(kid, "  " * depth + "└ ", depth + 1)

    for s in rows:
        if s.session_id not in seen and getattr(s, "parent_session_id", "") not in listed:
            walk(s, "", 0)
    for s in rows:  # a cycle in what the store says (never written by Loom) is still listed, flat
        if s.session_id not in seen:
            walk(s, "", 0)
    return out


def _title_of(session: SessionInfo | SessionRow, clean: Callable[[str], str]) -> str:
    """Its title; a child's agent before it (``[reviewer] …``), as the agent names it best."""
    title = clean(session.title)
    agent = clean(getattr(session, "agent", "") or "")
    return f"[{agent}] {title}".rstrip() if agent else title


_SESSION_COLUMNS = (("session_id", "SESSION"), ("status", "STATUS"), ("mode", "MODE"), ("model", "MODEL"))
TITLE_CELL = 30
"""A title longer than this is cut in the list (``loom sessions`` is a table, not the title's place)."""


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _session_line(cells: list[str], widths: list[int], context: str, cwd: str, title: str | None) -> str:
    padded = "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=False))
    if title is not None:
        padded += "  " + title.ljust(widths[-1])
    return f"{padded}  {context:>4}  {cwd}\n"


def send(args: argparse.Namespace) -> int:
    """``loom send SESSION "message"``: start a run; wait for it unless ``--no-wait`` (daemon only)."""
    from clients.cli.driving import EXIT_CODES, with_client
    from orchestrator.protocol import FINAL_STATUSES

    async def main(client: LoomClient) -> int:
        run = await client.send_message(args.session, args.message)
        sys.stderr.write(f"loom: run {run.run_id} started in session {args.session}\n")
        if args.no_wait:
            sys.stdout.write(run.model_dump_json() + "\n")
            return EXIT_OK
        while run.status not in FINAL_STATUSES:
            if run.status == "awaiting_approval":
                ids = ", ".join(run.pending_approvals)
                sys.stderr.write(f"loom: waiting for approval {ids} (loom approve ID / loom deny ID)\n")
            run = await client.get_run(run.run_id, wait_s=30)
        if run.final_text:
            sys.stdout.write(run.final_text.rstrip("\n") + "\n")
        why = f": {run.reason}" if run.reason and run.status != "completed" else ""
        sys.stderr.write(f"loom: run {run.run_id} {run.status}{why}\n")
        return EXIT_CODES.get(run.status, EXIT_FAILED)

    return with_client(main)


def attach(args: argparse.Namespace) -> int:
    """``loom attach SESSION``: the session's events from ``--after`` on, then live until Ctrl-C."""
    from clients.cli.driving import with_client
    from clients.cli.render import TerminalRenderer
    from clients.loom import LiveFollower

    async def main(client: LoomClient) -> int:
        renderer = TerminalRenderer() if not args.json else None
        follower = LiveFollower(args.session, args.after)
        await client.get_session(args.session)
        while True:
            events = await follower.next(client, 0 if args.no_follow else 30)
            for event in events:
                if renderer is None:
                    sys.stdout.write(json.dumps(event.model_dump(mode="json")) + "\n")
                else:
                    renderer(event)
                    if event.type == "approval_requested":
                        whose = f" ({event.child_session_id}'s {event.tool})" if event.child_session_id else ""
                        sys.stderr.write(f"loom: approval needed{whose}: loom approve {event.approval_id}\n")
            sys.stdout.flush()
            if args.no_follow and not any(e.seq is not None for e in events):
                return EXIT_OK

    return with_client(main)


def approvals(args: argparse.Namespace) -> int:
    """``loom approvals``: tool calls waiting for a decision."""
    from clients.cli.driving import with_client

    async def main(client: LoomClient) -> int:
        waiting = await client.list_approvals()
        if not waiting:
            sys.stdout.write("no approvals waiting\n")
        for a in waiting:
            arguments = json.dumps(a.arguments, ensure_ascii=False)[:100]
            sys.stdout.write(f"{a.approval_id}  {a.session_id}  {a.tool} {arguments}\n  why: {a.reason}\n")
        return EXIT_OK

    return with_client(main)


def answer(args: argparse.Namespace) -> int:
    """``loom answer ID accept --content JSON`` (or ``decline``, ``cancel``): a server's question."""
    from clients.cli.driving import with_client

    content: dict[str, object] | None = None
    if args.content is not None:
        try:
            parsed = json.loads(args.content)
        except ValueError as exc:
            sys.stderr.write(f"loom: --content is not JSON: {exc}\n")
            return EXIT_USAGE
        if not isinstance(parsed, dict):
            sys.stderr.write('loom: --content must be a JSON object, e.g. \'{"name": "Ann"}\'\n')
            return EXIT_USAGE
        content = parsed

    async def main(client: LoomClient) -> int:
        done = await client.answer_question(args.question_id, args.action, content, answered_by="cli")
        sys.stderr.write(f"loom: {done.question_id} ({done.server}): {done.action}\n")
        return EXIT_OK

    return with_client(main)


def decide(args: argparse.Namespace, decision: str) -> int:
    """``loom approve ID [--session]`` and ``loom deny ID [--reason TEXT]``."""
    from clients.cli.driving import with_client

    async def main(client: LoomClient) -> int:
        reason = getattr(args, "reason", "") or ""
        done = await client.decide_approval(args.approval_id, decision, reason=reason, decided_by="cli")
        sys.stderr.write(f"loom: {done.approval_id} ({done.tool}): {done.decision}\n")
        return EXIT_OK

    return with_client(main)
