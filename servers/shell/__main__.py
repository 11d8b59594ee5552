"""``python -m servers.shell --root DIR``: serve the shell tool over stdio."""

from __future__ import annotations

from servers.shell import main

if __name__ == "__main__":
    raise SystemExit(main())
