"""``python -m servers.fs --root DIR``: serve the fs tools over stdio."""

from __future__ import annotations

from servers.fs import main

if __name__ == "__main__":
    raise SystemExit(main())
