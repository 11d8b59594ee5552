"""``python -m servers.memory --db PATH [--project SCOPE] [--session SCOPE]``: serve the memory tools over stdio."""

from __future__ import annotations

from servers.memory import main

if __name__ == "__main__":
    raise SystemExit(main())
