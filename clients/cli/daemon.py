"""``loom serve``: the daemon (being built)."""

from __future__ import annotations

import argparse
import sys


def serve(args: argparse.Namespace) -> int:
    """Run the daemon until SIGTERM or Ctrl-C."""
    sys.stderr.write("loom: error: `loom serve` is not implemented yet\n")
    return 2
