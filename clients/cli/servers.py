"""``loom servers`` and ``loom models``: what sessions run on, through the face like every other client.

With a daemon running they ask it (so ``--session`` can name one of its open sessions and get the live state its
supervisor keeps); without one, a face in this process answers, and its servers are probed afresh. ``loom servers``
exits 1 when a server that should run has failed, so a script can use it as a health check.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from clients.cli.exits import EXIT_FAILED, EXIT_OK

if TYPE_CHECKING:
    from orchestrator.protocol_servers import ServerList

__all__ = ["add_parsers", "models", "servers"]


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``servers`` and ``models`` (standard library only: ``loom --help`` stays fast)."""
    listed = sub.add_parser(
        "servers",
        help="each MCP server's state, tools, restarts, latency and last error",
        description="Loom's built-in servers and the configured mcpServers. With --session (a session open on the "
        "daemon): their live state in that session. Otherwise each configured server is started, listed and closed "
        "afresh. Exit 1 when one has failed.",
    )
    listed.add_argument("--session", metavar="S", help="the live state of this session's servers (open on the daemon)")
    listed.add_argument("--json", action="store_true", help="print the listing as one JSON object")
    known = sub.add_parser("models", help="the models sessions can run on, with their context windows")
    known.add_argument("--json", action="store_true", help="print the listing as one JSON object")


def servers(args: argparse.Namespace) -> int:
    """``loom servers [--session S] [--json]``."""
    from clients.cli.driving import with_client
    from clients.cli.output import write_out
    from clients.loom import LoomClient
    from clients.server_rows import FULL_ERROR, SERVER_HEADINGS, plain, server_cells, table

    async def main(client: LoomClient) -> int:
        listing = await client.list_servers(args.session)
        failed = [s for s in listing.servers if s.state == "failed"]
        if args.json:
            write_out(listing.model_dump_json() + "\n")
        else:
            sys.stderr.write(f"loom: {_note(listing, args.session)}\n")
            write_out(table(SERVER_HEADINGS, [server_cells(s) for s in listing.servers]))
        if failed:
            names = ", ".join(plain(s.name) for s in failed)
            sys.stderr.write(f"loom: {len(failed)} server{'s' if len(failed) > 1 else ''} failed: {names}\n")
            if not args.json:  # the table cuts each error to fit; here is the whole of it, stderr and all
                for s in failed:
                    sys.stderr.write(f"  {plain(s.name)}: {plain(s.last_error, FULL_ERROR)}\n")
            return EXIT_FAILED
        return EXIT_OK

    return with_client(main)


def _note(listing: ServerList, asked: str | None) -> str:
    """Whose states the table shows, in the CLI's terms."""
    from clients.server_rows import listing_note, plain

    if listing.source == "session":
        return listing_note(listing)
    if asked:
        return f"session {plain(asked)} is not open here, so the configured servers were started afresh to list them"
    return "the configured servers, started afresh to list them (--session S: an open session's live state)"


def models(args: argparse.Namespace) -> int:
    """``loom models [--json]``."""
    from clients.cli.driving import with_client
    from clients.cli.output import write_out
    from clients.loom import LoomClient
    from clients.server_rows import MODEL_HEADINGS, model_cells, model_rules, table

    async def main(client: LoomClient) -> int:
        found = await client.list_models()
        if args.json:
            return write_out(found.model_dump_json() + "\n")
        text = table(MODEL_HEADINGS, [model_cells(m) for m in found.profiles])
        text += "\n* the default (pass --model PROVIDER:NAME to use another; providers: "
        text += ", ".join(found.providers) + ")\n"
        rules = model_rules(found)
        if rules:
            text += "\nother models' windows, by pattern (the config's win over built-ins; the longest match wins):\n"
            text += "".join(f"  {line}\n" for line in rules)
        return write_out(text)

    return with_client(main)
