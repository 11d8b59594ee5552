"""``loom rewind SESSION [--to RUN]``: list a session's checkpoints, or rewind its files to one and branch."""

from __future__ import annotations

import argparse
import sys
import time

from clients.cli.driving import with_client
from clients.cli.exits import EXIT_OK
from clients.loom import LoomClient


def rewind(args: argparse.Namespace) -> int:
    """Without ``--to``: the checkpoints. With it: restore the files and print the new branch's session id."""

    async def main(client: LoomClient) -> int:
        if args.to is None:
            for c in (await client.list_checkpoints(args.session_id)).checkpoints:
                when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(c.started))
                files = f"  changed: {', '.join(c.files_changed)}" if c.files_changed else ""
                sys.stdout.write(f"{c.run_id}  {when}  {c.prompt[:60]!r}{files}\n")
            return EXIT_OK
        done = await client.rewind_session(args.session_id, args.to)
        for f in done.files:
            sys.stdout.write(f"{f.action:<9} {f.path}\n")
        if not done.files:
            sys.stdout.write("no file had changed through Loom's fs tools since that checkpoint\n")
        if done.not_rewound:
            sys.stderr.write(
                "loom: these calls' side effects cannot be rewound (Loom only restores what its fs tools "
                f"changed): {'; '.join(done.not_rewound)}\n"
            )
        sys.stderr.write(f"loom: the conversation continues in session {done.session_id}\n")
        sys.stdout.write(done.session_id + "\n")
        return EXIT_OK

    return with_client(main)
