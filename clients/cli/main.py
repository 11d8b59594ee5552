"""``loom``: argument parsing and dispatch.

Only the standard library is imported at module level, so that ``loom --help`` answers in a few
tens of milliseconds; each command imports what it needs when it runs.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from clients.cli.exits import EXIT_CANCELLED, EXIT_FAILED, EXIT_OK, EXIT_USAGE

__all__ = ["EXIT_CANCELLED", "EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "build_parser", "main"]

_EPILOG = """exit codes: 0 completed, 1 the run failed, 2 bad usage or config, 130 cancelled.
state lives in $LOOM_HOME (default ~/.loom)."""


def _positive_int(text: str) -> int:
    """An ``int`` option that must be at least 1; argparse reports the error with the sub-command's usage."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


class _Version(argparse.Action):
    """``--version``: the installed package's version, read only when asked (``--help`` stays fast)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help=str(kwargs.get("help", "")))

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        from servers._version import loom_version

        sys.stdout.write(f"loom {loom_version()}\n")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The whole command-line grammar."""
    parser = argparse.ArgumentParser(
        prog="loom",
        description="Loom: a local agent runtime where everything is an MCP server.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_Version, help="show Loom's version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser("run", help="run one session headless in the current directory")
    run.add_argument("goal", help="what the agent should do")
    run.add_argument(
        "--model",
        help="PROVIDER:NAME, e.g. anthropic:claude-sonnet-4-5, openai:deepseek-chat, scripted:PATH, scripted:demo "
        "(default: $LOOM_MODEL, then config, then Anthropic if ANTHROPIC_API_KEY is set, else the scripted demo)",
    )
    run.add_argument("--json", action="store_true", help="print every event as NDJSON on stdout")
    run.add_argument(
        "--max-steps", type=_positive_int, default=50, metavar="N", help="stop after N model calls (default 50)"
    )
    run.add_argument("--cwd", help="work in this directory instead of the current one")
    run.add_argument(
        "--mode",
        choices=["ask", "accept-edits", "plan", "bypass"],
        default="accept-edits",
        help="policy mode (default accept-edits: reads and file edits inside the workspace run). The run is "
        "headless: a call that policy would ask about is denied and the model is told. bypass runs everything "
        "except what a deny rule forbids",
    )
    run.add_argument("--config", metavar="FILE", help="extra config file (model, mcpServers) read after the others")

    server = sub.add_parser("server", help="serve one of Loom's own MCP servers over stdio")
    server.add_argument("name", choices=["fs", "shell", "memory", "checkpoints", "subagents"], help="which server")
    server.add_argument("args", nargs=argparse.REMAINDER, help="the server's own options, e.g. --root DIR")

    export = sub.add_parser("export", help="print a run's events as JSONL")
    export.add_argument("run_id", help="the run id (or a unique prefix of it)")

    rewind = sub.add_parser(
        "rewind", help="restore the files a session changed since one of its runs, and branch the conversation"
    )
    rewind.add_argument("session_id", help="the session")
    rewind.add_argument("--to", metavar="RUN_ID", help="rewind to just before this run (omit to list checkpoints)")

    trace = sub.add_parser("trace", help="a run's timeline: model calls, tool calls with durations, approvals, errors")
    trace.add_argument("run_id", help="the run id")
    trace.add_argument("--jsonl", action="store_true", help="one JSON object per timeline entry")

    serve = sub.add_parser("serve", help="run the Loom daemon: the MCP endpoint over streamable HTTP on 127.0.0.1")
    serve.add_argument("--port", type=int, default=None, help="TCP port (default: $LOOM_PORT, else 7878; 0 picks one)")
    serve.add_argument("--config", metavar="FILE", help="extra config file (mcpServers) read after the others")

    sub.add_parser("mcp", help="the stdio MCP face for another agent's mcp.json (attaches to the daemon if running)")

    sessions = sub.add_parser("sessions", help="list sessions (the daemon's when one runs)")
    sessions.add_argument("--all", action="store_true", help="include archived sessions")
    sessions_of = sessions.add_subparsers(dest="sessions_action", metavar="{rename,archive}")
    renamed = sessions_of.add_parser("rename", help="give a session a title (one line, at most 80 characters)")
    renamed.add_argument("session", help="session id")
    renamed.add_argument("title", help="the title ('' removes it)")
    archived = sessions_of.add_parser("archive", help="archive a session (hidden from lists, never deleted)")
    archived.add_argument("session", help="session id")

    send = sub.add_parser("send", help="send a message to a session, starting a run")
    send.add_argument("session", help="session id")
    send.add_argument("message", help="the message")
    send.add_argument("--no-wait", action="store_true", help="return at once with the run id (daemon only)")

    attach = sub.add_parser("attach", help="follow a session's events live, from any point")
    attach.add_argument("session", help="session id")
    attach.add_argument("--after", type=int, default=0, metavar="SEQ", help="start after this seq (default: 0)")
    attach.add_argument("--no-follow", action="store_true", help="print what is stored and exit")
    attach.add_argument("--json", action="store_true", help="print events as NDJSON")

    sub.add_parser("approvals", help="list tool calls waiting for approval")
    approve = sub.add_parser("approve", help="approve a pending tool call")
    approve.add_argument("approval_id")
    approve.add_argument("--session", action="store_true", help="approve this tool for the rest of the session")
    deny = sub.add_parser("deny", help="deny a pending tool call; the reason is shown to the model")
    deny.add_argument("approval_id")
    deny.add_argument("--reason", default="", help="why (the model sees it)")
    answer = sub.add_parser("answer", help="answer a question an MCP server asked (loom run shows its id)")
    answer.add_argument("question_id")
    answer.add_argument("action", choices=("accept", "decline", "cancel"))
    answer.add_argument("--content", default=None, metavar="JSON", help="accept: the answer, a JSON object")

    resume = sub.add_parser(
        "resume",
        help="continue an interrupted run (the daemon's when one runs; else here, headless)",
        description="Continue an interrupted run under its own id: finished tool calls are reused, an unfinished "
        "read-only or idempotent call runs again, any other unfinished call needs a review (loom approve / "
        "loom deny on the daemon; a headless resume stops with status needs_review).",
    )
    resume.add_argument("run_id", help="the run id")
    resume.add_argument("--json", action="store_true", help="print every event as NDJSON on stdout")

    compact = sub.add_parser(
        "compact",
        help="replace a session's older history with a checked summary (the store keeps everything)",
        description="Compact a session's context: the model summarises the older history into fixed sections, "
        "which are checked before they replace it; the raw history stays in the store. Sessions also compact "
        "by themselves past their model's threshold (0.8 of the window by default).",
    )
    compact.add_argument("session", help="session id")
    compact.add_argument("--focus", metavar="TEXT", help="what the summary should give most room to")
    compact.add_argument(
        "--preview", action="store_true", help="only show the token counts before and after (no model call)"
    )
    compact.add_argument("--show-summary", action="store_true", help="print the summary that was written")

    model = sub.add_parser(
        "model", help="switch a session to another model (compacting first if its window is smaller)"
    )
    model.add_argument("session", help="session id")
    model.add_argument("model", help="PROVIDER:NAME, e.g. anthropic:claude-sonnet-4-5")

    trust = sub.add_parser(
        "trust",
        help="trust a project's own .loom/config.json and .loom/policy.toml (servers, sandbox, allow rules)",
    )
    trust.add_argument("dir", nargs="?", help="the project directory (default: the current one)")
    what = trust.add_mutually_exclusive_group()
    what.add_argument("--show", action="store_true", help="print the files and whether they are trusted, and stop")
    what.add_argument("--revoke", action="store_true", help="stop trusting the project")
    tui = sub.add_parser(
        "tui", help="the terminal UI on the daemon (started in the background when none runs); also plain `loom`"
    )
    tui.add_argument("session", nargs="?", help="the session to open (default: a new one)")
    tui.add_argument("--model", help="PROVIDER:NAME for sessions made here, as for `loom run`")
    tui.add_argument(
        "--mode",
        choices=["ask", "accept-edits", "plan", "bypass"],
        default="ask",
        help="policy mode for sessions made here (default ask: reads run, anything else waits for your approval)",
    )
    tui.add_argument("--cwd", help="sessions made here work in this directory instead of the current one")
    from clients.cli.orchestrate import add_parser as add_orchestrate  # standard library only, like this module

    add_orchestrate(sub)
    from clients.cli.goals import add_parsers as add_goals  # standard library only, like this module

    add_goals(sub)
    from clients.cli.handoff import add_parsers as add_handoff  # standard library only, like this module

    add_handoff(sub)
    from clients.cli.servers import add_parsers as add_servers  # standard library only, like this module

    add_servers(sub)
    from clients.cli.worker import add_parsers as add_worker  # standard library only, like this module

    add_worker(sub)
    runs = sub.add_parser("runs", help="list recent runs")
    runs.add_argument("--limit", type=_positive_int, default=20, metavar="N", help="show at most N runs (default 20)")
    review = sub.add_parser(
        "review",
        help="a read-only reviewer agent checks the uncommitted changes (or a range, a path, a run) and lists findings",
        description="A reviewer child session (the built-in `reviewer` agent, in plan mode: read-only) examines the "
        "uncommitted changes (git diff HEAD and the untracked files), or TARGET: a revision range such as main..HEAD, "
        "or a path. Findings print as path:line: severity: message. Exit 0 pass, 1 changes needed, 2 no verdict.",
    )
    review.add_argument("target", nargs="?", default="", help="a revision range (main..HEAD) or a path to limit it to")
    review.add_argument("--session", metavar="S", help="make the reviewer a child of this session")
    review.add_argument("--run", metavar="RUN_ID", help="review this run against its goal instead of a change")
    review.add_argument(
        "--model", help="the reviewer's model, PROVIDER:NAME (default: its definition's, as configured)"
    )
    review.add_argument("--cwd", help="review this directory instead of the current one")
    review.add_argument("--json", action="store_true", help="print the review's result as one JSON object")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``loom`` command; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        if not argv and sys.stdin.isatty() and sys.stdout.isatty():  # a person at a terminal: the TUI
            args = parser.parse_args(["tui"])
        else:
            parser.print_help()
            return EXIT_OK
    if args.command == "tui":
        from clients.tui import run_tui

        return run_tui(args)
    if args.command == "server":
        if args.name == "checkpoints":  # Loom's durable store: `--db PATH` (default $LOOM_HOME/loom.db)
            from servers import checkpoints

            return checkpoints.main(args.args)
        if args.name == "memory":  # notes: `--db PATH` (default $LOOM_HOME/memory.db) `--project` `--session`
            from servers import memory

            return memory.main(args.args)
        if args.name == "subagents":  # child sessions on the running daemon: `--parent SESSION`
            from servers import subagents

            return subagents.main(args.args)
        from clients.cli.serve import serve_builtin

        return serve_builtin(args.name, args.args)
    if args.command == "serve":
        from clients.cli.daemon import serve as serve_daemon

        return serve_daemon(args)
    if args.command == "orchestrate":
        from clients.cli.orchestrate import orchestrate

        return orchestrate(args)
    if args.command in ("goal", "goals"):
        from clients.cli.goals import goal_command, goals_command

        return goal_command(args) if args.command == "goal" else goals_command(args)
    if args.command in ("handoff", "memory"):
        from clients.cli.handoff import handoff_command, memory_command

        return handoff_command(args) if args.command == "handoff" else memory_command(args)
    if args.command in ("servers", "models"):
        from clients.cli import servers as listing

        return listing.servers(args) if args.command == "servers" else listing.models(args)
    if args.command in ("worker", "workers"):
        from clients.cli import worker as pool

        return pool.worker(args) if args.command == "worker" else pool.workers(args)
    if args.command == "trust":
        from clients.cli.trust import trust_command

        return trust_command(args)
    if args.command == "resume":
        from clients.cli.resume import resume as resume_run

        return resume_run(args)
    if args.command == "mcp":
        from clients.cli.stdio_face import run_stdio_face

        return run_stdio_face(args)
    if args.command in ("compact", "model"):
        from clients.cli import context

        return context.compact(args) if args.command == "compact" else context.switch(args)
    if args.command in ("sessions", "send", "attach", "approvals", "approve", "deny", "answer"):
        from clients.cli import sessions as remote

        if args.command == "answer":
            return remote.answer(args)

        if args.command == "approve":
            return remote.decide(args, "approve_session" if args.session else "approve_once")
        if args.command == "deny":
            return remote.decide(args, "deny")
        handlers = {"sessions": remote.sessions, "send": remote.send, "attach": remote.attach}
        return handlers.get(args.command, remote.approvals)(args)
    from clients.cli import commands

    if args.command == "run":
        return commands.run(args)
    if args.command == "rewind":
        from clients.cli.rewind import rewind as rewind_session

        return rewind_session(args)
    if args.command == "trace":
        from clients.cli.trace import trace as trace_run

        return trace_run(args.run_id, args.jsonl)
    if args.command == "export":
        return commands.export(args.run_id)
    if args.command == "review":
        from clients.cli.review import review as review_change

        return review_change(args)
    if args.command == "runs":
        return commands.list_runs(args.limit)
    parser.error(f"unknown command {args.command}")  # pragma: no cover - argparse rejects it first


if __name__ == "__main__":
    sys.exit(main())
