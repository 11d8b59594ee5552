"""``loom tui``: the terminal UI, a client of the daemon like any other (see ``docs/tui.md``).

Only :func:`run_tui` is imported by the CLI; Textual and the MCP SDK load when it runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["run_tui"]


def run_tui(args: argparse.Namespace) -> int:
    """Open the TUI (``loom tui [SESSION] [--model M] [--mode MODE] [--cwd DIR]``); returns the exit code."""
    from clients.tui.app import LoomApp
    from orchestrator.config import loom_home

    cwd = Path(args.cwd).resolve() if getattr(args, "cwd", None) else Path.cwd()
    app = LoomApp(
        home=loom_home(),
        cwd=cwd,
        session_id=getattr(args, "session", None),
        model=getattr(args, "model", None),
        mode=getattr(args, "mode", None) or "ask",
    )
    return app.run() or 0
