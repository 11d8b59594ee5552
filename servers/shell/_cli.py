"""``loom server shell``: the command line of the shell server, served over stdio."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from servers._stdio import serve_stdio
from servers.shell._server import build_server

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Serve the shell tool over stdio (``loom server shell`` and ``python -m servers.shell``).

    Args:
        argv: Command-line arguments without the program name; ``sys.argv[1:]`` when None.

    Returns:
        The process exit status.
    """
    parser = argparse.ArgumentParser(prog="loom server shell", description="Serve a shell tool over MCP stdio.")
    parser.add_argument("--root", type=Path, default=None, metavar="DIR", help="directory commands run in (default: .)")
    parser.add_argument(
        "--timeout", type=float, default=60.0, metavar="SECONDS", help="default command timeout (default: 60)"
    )
    parser.add_argument(
        "--term-grace",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="wait between SIGTERM and SIGKILL when a command is killed (default: 2)",
    )
    parser.add_argument(
        "--sandbox",
        choices=["auto", "bwrap", "off"],
        default="auto",
        help="auto: use bwrap when it works here (default); bwrap: require it; off: never sandbox",
    )
    parser.add_argument(
        "--no-network", dest="network", action="store_false", help="run commands without network (needs bwrap)"
    )
    parser.add_argument(
        "--pass-env",
        action="append",
        default=[],
        metavar="NAME",
        help="also pass this variable from the server's environment to commands (repeatable; secrets only so)",
    )
    parser.add_argument(
        "--set-env",
        action="append",
        default=[],
        type=_assignment,
        metavar="NAME=VALUE",
        help="give commands this variable with this value (repeatable)",
    )
    parser.add_argument(
        "--protect",
        action="append",
        default=[],
        type=Path,
        metavar="PATH",
        help="a path sandboxed commands may not create or change, even inside the root (repeatable)",
    )
    args = parser.parse_args(argv)
    return serve_stdio(
        "shell",
        lambda: build_server(
            args.root or Path.cwd(),
            default_timeout_s=args.timeout,
            term_grace_s=args.term_grace,
            sandbox=args.sandbox,
            network=args.network,
            env_pass=args.pass_env,
            env_set=dict(args.set_env),
            protect=[path.absolute() for path in args.protect],
        ),
    )


def _assignment(raw: str) -> tuple[str, str]:
    name, equals, value = raw.partition("=")
    if not equals or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {raw!r}")
    return name, value
