"""``loom mcp``: the stdio MCP face (being built)."""

from __future__ import annotations

import argparse
import sys


def run_stdio_face(args: argparse.Namespace) -> int:
    """Serve Loom's MCP face over stdio."""
    sys.stderr.write("loom: error: `loom mcp` is not implemented yet\n")
    return 2
