"""What the daemon answers a request it will not serve: a 401 a person can act on, and no OAuth to try.

The daemon has one secret, the bearer token in ``$LOOM_HOME/daemon.token``, and no authorization server. A bare
401 reads to an MCP client as "this server speaks OAuth": Claude Code, given a 401 without ``resource_metadata``,
probes ``/.well-known/oauth-protected-resource``, ``/.well-known/oauth-authorization-server`` and
``/.well-known/openid-configuration``, then falls back to the default endpoints of the 2025-03-26 authorization
spec and POSTs ``/register``; when those answered 401 too it reported "Dynamic Client Registration rejected
(HTTP 401)" (anthropics/claude-code#93320, #7290). So:

- a request without the token, or with another one, gets a 401 whose JSON body and ``WWW-Authenticate`` say to
  send ``Authorization: Bearer <token>`` and which file holds it (never the token itself);
- the OAuth discovery and registration paths answer 404 with the same explanation, whatever the request carries:
  a server without authorization may do so, and a client that reads the body as an OAuth error response
  (``error``, ``error_description``) shows the description to its user.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from starlette.authentication import BaseUser
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["TokenGate", "is_oauth_path", "explanation"]

_OAUTH_PREFIXES = (
    "/.well-known/oauth-protected-resource",
    "/.well-known/oauth-authorization-server",
    "/.well-known/openid-configuration",
)
_OAUTH_PATHS = frozenset({"/register", "/authorize", "/token", "/oauth/register", "/oauth/authorize", "/oauth/token"})
_HEADER_SAFE = re.compile(r"^[\x20\x21\x23-\x5b\x5d-\x7e]*$")
"""RFC 6750's characters for ``error_description``: printable ASCII without ``"`` and ``\\``."""


def is_oauth_path(path: str) -> bool:
    """Whether ``path`` is where an MCP client looks for OAuth metadata or registration (the daemon has none)."""
    if path in _OAUTH_PATHS:
        return True
    return any(path == prefix or path.startswith(prefix + "/") for prefix in _OAUTH_PREFIXES)


def explanation(token_file: str, url: str, *, sent: bool) -> str:
    """The sentence telling a person how to authenticate: which header, which file, a Claude Code example.

    Args:
        token_file: Where the token is (a path, or ``$LOOM_HOME/daemon.token`` when unknown).
        url: The daemon's MCP endpoint as the client reached it.
        sent: Whether the request carried a bearer token (then it was not this daemon's).
    """
    what = (
        "The bearer token sent is not this Loom daemon's (a new one is made when its file is recreated). "
        if sent
        else "This Loom daemon needs its bearer token. "
    )
    return (
        f"{what}Send the header 'Authorization: Bearer <token>' with <token> the contents of {token_file} "
        "(private to you: never paste it into a shared place). Loom uses no OAuth: there is nothing to register "
        f'or log in to. Claude Code: claude mcp add --transport http loom {url} --header "Authorization: Bearer '
        f'$(cat {token_file})". Or run `loom mcp` (stdio), which reads the token itself.'
    )


class TokenGate:
    """Let through requests that carry the daemon's token; answer the rest with the 401 or 404 above.

    Sits after Starlette's ``AuthenticationMiddleware`` (with the SDK's bearer backend), which has put an
    authenticated user in the scope when, and only when, the token matched.

    Args:
        app: What serves authenticated requests.
        token_file: The token's path, named in every refusal (None: ``$LOOM_HOME/daemon.token``).
    """

    def __init__(self, app: ASGIApp, token_file: Path | None = None) -> None:
        self.app = app
        named = str(token_file) if token_file is not None else "$LOOM_HOME/daemon.token"
        self._token_file = named
        # A path with quotes, backslashes or non-ASCII cannot go into the header as it is; the body still names it.
        self._header_file = named if _HEADER_SAFE.match(named) else "$LOOM_HOME/daemon.token"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve, or refuse with a response that says what to do."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope.get("path", "")
        if is_oauth_path(path):
            await self._refuse(scope, send, 404, "not_found", sent=_has_bearer(scope))
            return
        user = scope.get("user")
        if isinstance(user, BaseUser) and user.is_authenticated:
            await self.app(scope, receive, send)
            return
        await self._refuse(scope, send, 401, "invalid_token", sent=_has_bearer(scope))

    async def _refuse(self, scope: Scope, send: Send, status: int, error: str, *, sent: bool) -> None:
        url = _endpoint(scope)
        body = json.dumps({"error": error, "error_description": explanation(self._token_file, url, sent=sent)})
        payload = body.encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
        if status == 401:
            short = f"pass the Loom daemon token as Authorization: Bearer <token>; it is in {self._header_file}" + (
                " (the token sent is not the current one)" if sent else ""
            )
            # No resource_metadata: there is no authorization server to discover.
            challenge = f'Bearer error="{error}", error_description="{short}", realm="loom"'
            headers.append((b"www-authenticate", challenge.encode("ascii")))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": payload})


def _has_bearer(scope: Scope) -> bool:
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            return value[:7].lower() == b"bearer " and bool(value[7:].strip())
    return False


def _endpoint(scope: Scope) -> str:
    """``http://HOST/mcp`` as the client addressed the daemon (the Host was checked before this runs)."""
    host = next((value.decode("latin-1") for name, value in scope.get("headers", ()) if name == b"host"), "")
    if not _HEADER_SAFE.match(host) or not host or " " in host:
        host = "127.0.0.1:PORT"
    return f"http://{host}/mcp"
