"""Writing to stdout when the reader may already be gone (``loom runs | head -1``).

Only the standard library: the listing commands import it, and they must start in tens of milliseconds.
"""

from __future__ import annotations

import os
import sys

from clients.cli.exits import EXIT_OK

__all__ = ["discard_stdout", "write_out"]


def discard_stdout() -> None:
    """Point fd 1 at /dev/null, so that flushing what is still buffered (now, or at exit) cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)


def write_out(text: str) -> int:
    """Write ``text`` to stdout; a reader that stopped early is no error: ``EXIT_OK``."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        discard_stdout()
    return EXIT_OK
