"""The daemon's bearer token: one secret in ``$LOOM_HOME/daemon.token`` that every client presents.

Whoever can read the file may drive the daemon, so the file is created owner-only in one step
(``O_CREAT | O_EXCL`` with mode 0600: there is never a moment when it exists with wider permissions)
and the daemon refuses to use one that others can read. The token never appears in arguments,
environment variables or logs.
"""

from __future__ import annotations

import hmac
import os
import secrets
import stat
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the SDK takes ~1 s to import; clients that only read the token must not pay for it
    from mcp.server.auth.provider import AccessToken

TOKEN_FILE = "daemon.token"
CLIENT_ID = "loom"
"""The principal every token holder is; legacy-era MCP sessions are bound to it."""


class TokenError(Exception):
    """The token file is missing, unreadable or unsafe; the message says what to do."""


def token_path(home: Path) -> Path:
    """Where the daemon's token lives under ``home``."""
    return home / TOKEN_FILE


def ensure_home(home: Path) -> None:
    """Create ``home`` (owner-only, 0700) if it does not exist yet; an existing one is left as it is."""
    home.mkdir(mode=0o700, parents=True, exist_ok=True)


def ensure_token(home: Path) -> str:
    """The daemon's token: created on first start, reused afterwards.

    Call with the single-instance lock held, so that two starters never race on the file.

    Raises:
        TokenError: the existing file is readable by others, not a regular file, or unusable.
    """
    path = token_path(home)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        token = _read(path, check_private=True)
        if token:
            return token
        # Empty: a start that died between creating and writing. Nobody can hold this token.
        path.unlink()
        return ensure_token(home)
    token = secrets.token_urlsafe(32)
    with os.fdopen(fd, "w", encoding="ascii") as out:
        out.write(token + "\n")
    return token


def load_token(home: Path) -> str:
    """Read the token a running daemon expects (for clients attaching to it).

    A token another user could read (or another user's file) is refused, as the daemon refuses it: a
    client that used it would drive a daemon whose sessions anyone on the machine can reach, or one that
    is not the user's at all.

    Raises:
        TokenError: there is no token (the daemon never ran with this home), it cannot be read, or it is
            not private to this user.
    """
    token = _read(token_path(home), check_private=True, restart_hint=True)
    if not token:
        raise TokenError(f"{token_path(home)} is empty; restart the daemon (`loom serve`) to create a new token")
    return token


def _read(path: Path, *, check_private: bool, restart_hint: bool = False) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise TokenError(f"no daemon token at {path}; start the daemon with `loom serve`") from None
    except OSError as exc:
        raise TokenError(f"cannot read the daemon token {path}: {exc.strerror or exc}") from exc
    with os.fdopen(fd, encoding="ascii", errors="replace") as src:
        info = os.fstat(src.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise TokenError(f"{path} is not a regular file; remove it and start the daemon again")
        if check_private and (info.st_mode & 0o077 or info.st_uid != os.getuid()):
            # A running daemon keeps its token in memory: deleting the file alone would not end its exposure.
            what = "stop the daemon, delete it and start `loom serve` again" if restart_hint else "delete it"
            problem = (
                f"is owned by another user (uid {info.st_uid})"
                if info.st_uid != os.getuid()
                else f"is readable by others (mode {stat.S_IMODE(info.st_mode):04o})"
            )
            raise TokenError(f"{path} {problem}; {what} so that `loom serve` creates a private one")
        return src.read().strip()


class StaticTokenVerifier:
    """The SDK's ``TokenVerifier`` for one shared secret, compared in constant time."""

    def __init__(self, token: str) -> None:
        from mcp.server.auth.provider import AccessToken

        if not token:
            raise ValueError("the daemon token must not be empty")
        self._expected = token.encode()
        self._access = AccessToken(token=token, client_id=CLIENT_ID, scopes=[])

    async def verify_token(self, token: str) -> AccessToken | None:
        """The daemon's access token if ``token`` is its secret, else None (the middleware answers 401)."""
        if not hmac.compare_digest(token.encode(), self._expected):
            return None
        return self._access
