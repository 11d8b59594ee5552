"""The Loom daemon (``loom serve``): the MCP face over streamable HTTP on 127.0.0.1, behind a token.

To attach from Python::

    from orchestrator.daemon import read_discovery, load_token
    found = read_discovery(home)          # None: no daemon running for this LOOM_HOME
    token = load_token(home)              # send as "Authorization: Bearer <token>"

or let :func:`clients.loom.open_client` do both and hand back a typed client of the daemon's face.

This package's ``__init__`` and its ``auth`` and ``discovery`` modules import only the standard
library; ``app`` and ``runner`` import the MCP SDK (about a second).
"""

from __future__ import annotations

from orchestrator.daemon.auth import TokenError, load_token, token_path
from orchestrator.daemon.discovery import AlreadyRunning, Discovery, discovery_path, read_discovery

__all__ = [
    "AlreadyRunning",
    "Discovery",
    "TokenError",
    "discovery_path",
    "load_token",
    "read_discovery",
    "token_path",
]
