"""``python -m servers.subagents [--parent SESSION]``: serve the subagents tools over stdio, on the daemon."""

from __future__ import annotations

from servers.subagents import main

if __name__ == "__main__":
    raise SystemExit(main())
