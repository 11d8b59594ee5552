"""``python -m servers.checkpoints --db PATH``: serve the checkpoints tools over stdio."""

from __future__ import annotations

from servers.checkpoints import main

if __name__ == "__main__":
    raise SystemExit(main())
