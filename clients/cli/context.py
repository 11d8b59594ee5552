"""``loom compact`` and ``loom model``: a session's context, through the face like every other client."""

from __future__ import annotations

import argparse
import sys

from clients.cli.driving import with_client
from clients.cli.exits import EXIT_FAILED, EXIT_OK
from clients.loom import LoomClient
from orchestrator.protocol import CompactionInfo


def compact(args: argparse.Namespace) -> int:
    """``loom compact SESSION [--focus TEXT] [--preview]``."""

    async def main(client: LoomClient) -> int:
        done = await client.compact_session(args.session, focus=args.focus or "", preview=args.preview)
        sys.stdout.write(describe_compaction(done) + "\n")
        if done.status == "compacted" and args.show_summary:
            sys.stdout.write("\n" + done.summary.rstrip("\n") + "\n")
        return EXIT_FAILED if done.status == "failed" else EXIT_OK

    return with_client(main)


def switch(args: argparse.Namespace) -> int:
    """``loom model SESSION PROVIDER:NAME``."""

    async def main(client: LoomClient) -> int:
        done = await client.switch_model(args.session, args.model)
        if done.compaction is not None:
            sys.stdout.write(describe_compaction(done.compaction) + "\n")
        sys.stdout.write(
            f"session {done.session_id} now uses {done.model} (window {done.window:,} tokens; was {done.previous})\n"
        )
        return EXIT_OK

    return with_client(main)


def describe_compaction(done: CompactionInfo) -> str:
    """One line saying what a compaction did or would do, with its token counts."""
    window = done.window
    before, after = done.tokens_before, done.tokens_after
    counts = f"{before:,} → {after:,} tokens ({before / window:.0%} → {after / window:.0%} of {window:,})"
    if done.status == "preview":
        return (
            f"preview: compacting would replace {done.dropped_messages} messages "
            f"({done.dropped_tool_calls} tool calls) with a summary: about {counts}"
        )
    if done.status == "compacted":
        return f"compacted: {done.detail}: {counts}"
    if done.status == "nothing_to_compact":
        return f"nothing to compact: {done.detail}"
    return f"compaction failed, the history is kept as it was: {done.detail}"
