"""The daemon's ASGI app: the MCP face over streamable HTTP, plus ``GET /health``, all behind the token.

Every request passes, in order: the Host/Origin check (421 for a foreign ``Host``, 403 for a foreign
``Origin``: a web page that rebinds a DNS name to 127.0.0.1 never gets further), then the bearer
token (a 401 whose body and ``WWW-Authenticate`` say how to pass it and where it is: see
:mod:`orchestrator.daemon.challenge`), then the route. Nothing else, not even a 404, is answered to a
request without the token, except the OAuth discovery and registration paths, which answer 404 with
the same explanation so that no client starts an OAuth flow that cannot succeed. The MCP app itself
adds the body limit (413 over 4 MiB) and JSON-RPC parse errors (400). Legacy-era SSE streams carry
event ids and resume from ``Last-Event-ID`` (:mod:`orchestrator.daemon.resume`).
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import anyio
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from orchestrator.daemon.auth import StaticTokenVerifier
from orchestrator.daemon.challenge import TokenGate
from orchestrator.daemon.resume import BoundedEventStore, SessionScope

MCP_PATH = "/mcp"


def transport_security() -> TransportSecuritySettings:
    """Loopback only: the Host and Origin values a local client sends, on any port."""
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1:*", "localhost:*"],
        allowed_origins=["http://127.0.0.1:*", "http://localhost:*"],
    )


class HostOriginGuard:
    """Apply the SDK's Host/Origin check to every route, not just the MCP endpoint, before auth."""

    def __init__(self, app: ASGIApp, settings: TransportSecuritySettings) -> None:
        self.app = app
        self._checker = TransportSecurityMiddleware(settings)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer 421/403 for a foreign Host/Origin, else pass the request on."""
        if scope["type"] == "http":
            # is_post=False: the Content-Type rule is the MCP endpoint's own business (it answers 400).
            rejected = await self._checker.validate_request(Request(scope), is_post=False)
            if rejected is not None:
                await rejected(scope, receive, send)
                return
        await self.app(scope, receive, send)


class RequestGate:
    """In-flight requests, so that a stopping daemon can end them at once and cleanly.

    Long polls (up to a minute) and legacy SSE streams would otherwise hold a shutdown for uvicorn's
    whole grace period, then be cancelled with a traceback. :meth:`close` cancels them instead: a
    request with no response yet gets a 503 JSON-RPC error, a started stream is ended, and requests
    that still arrive on open connections get the 503 straight away.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.closed = False
        self._in_flight: set[anyio.CancelScope] = set()

    def close(self) -> None:
        """Refuse new requests and cancel the ones in flight."""
        self.closed = True
        for scope in self._in_flight:
            scope.cancel()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Run one request (or pass lifespan events through) unless the gate is closed."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.closed:
            await _shutting_down(scope, receive, send)
            return
        started = complete = False

        async def tracking_send(message: Message) -> None:
            nonlocal started, complete
            if complete:
                # The SDK's transport answers a message posted to a session that has just closed (a follower's late
                # notifications/cancelled) with an error response after its 202; the client has its answer already,
                # and uvicorn would log the second one as "Exception in ASGI application" with a traceback.
                return
            if message["type"] == "http.response.start":
                started = True
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                complete = True
            await send(message)

        with anyio.CancelScope() as cancel:
            self._in_flight.add(cancel)
            try:
                await self.app(scope, receive, tracking_send)
            except anyio.ClosedResourceError:
                # The same late message: after answering, the SDK hands the error to the closed session's stream,
                # which raises again. The request was answered; anything else is a fault to report.
                if not complete:
                    raise
                _log.debug("a message arrived after its session closed; it was answered and dropped")
            finally:
                self._in_flight.discard(cancel)
        if cancel.cancelled_caught:
            if not started:
                await _shutting_down(scope, receive, send)
            elif not complete:
                await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _shutting_down(scope: Scope, receive: Receive, send: Send) -> None:
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": -32603, "message": "the Loom daemon is shutting down"}}
    await Response(json.dumps(body), status_code=503, media_type="application/json")(scope, receive, send)


class LateMessageFilter(logging.Filter):
    """Demotes the SDK's "Error handling POST request" for a message that arrived after its session closed.

    Under load a client's last notification (a cancel of a follow it no longer needs) can land after the SDK has
    closed that session's streams; the SDK logs the ``ClosedResourceError`` with a traceback at ERROR, though
    nothing was lost and the client was answered. It stays in the log at DEBUG, without the traceback.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Lower the record above to DEBUG, kept only where DEBUG is on (handlers do not check loggers' levels)."""
        exc = record.exc_info[1] if record.exc_info else None
        if not isinstance(exc, anyio.ClosedResourceError):
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        record.msg = f"{record.getMessage()}: a message arrived after its session closed"
        record.args, record.exc_info, record.exc_text = None, None, None
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


_SDK_TRANSPORT_LOG = logging.getLogger("mcp.server.streamable_http")
_log = logging.getLogger(__name__)


def build_app(
    face: MCPServer,
    token: str,
    *,
    info: Mapping[str, Any] | None = None,
    token_file: Path | None = None,
    event_store: BoundedEventStore | None = None,
) -> Starlette:
    """The daemon's Starlette app serving ``face`` at ``/mcp``.

    Its lifespan runs the face's session manager; serve it with the lifespan on (uvicorn does by
    default), or enter ``face.session_manager.run()`` yourself.

    Args:
        face: the MCP server to expose; :meth:`MCPServer.streamable_http_app` is called on it once.
        token: the bearer token every request must carry.
        info: extra fields for ``GET /health`` (pid, version, ...).
        token_file: where the token is, named in every 401 (never the token itself).
        event_store: where legacy-era SSE events are kept for ``Last-Event-ID`` (a new bounded one if None).
    """
    settings = transport_security()
    store = event_store if event_store is not None else BoundedEventStore()
    mcp_app = face.streamable_http_app(
        streamable_http_path=MCP_PATH,
        # Legacy-era clients get sessions (Mcp-Session-Id) and a back-channel; modern requests are
        # single-exchange whatever this says.
        stateless_http=False,
        # SSE responses, so that progress and log notifications reach the caller mid-request.
        json_response=False,
        transport_security=settings,
        # Event ids on every SSE message of a 2025-era stream and replay from Last-Event-ID; 2026-07-28 requests
        # are single exchanges the SDK never stores.
        event_store=store,
    )
    health_body = {"ok": True, **(info or {})}

    async def health(request: Request) -> Response:
        return JSONResponse(health_body)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # A mounted app's own lifespan never runs, so the parent runs the session manager.
        async with face.session_manager.run():
            yield

    if not any(isinstance(f, LateMessageFilter) for f in _SDK_TRANSPORT_LOG.filters):
        _SDK_TRANSPORT_LOG.addFilter(LateMessageFilter())
    return Starlette(
        routes=[
            Route("/health", health, methods=["GET"]),
            # Mounted at "/" rather than "/mcp": a Mount("/mcp") answers POST /mcp with a 307 to /mcp/.
            Mount("/", app=SessionScope(mcp_app, store)),
        ],
        middleware=[
            Middleware(HostOriginGuard, settings=settings),
            Middleware(AuthenticationMiddleware, backend=BearerAuthBackend(StaticTokenVerifier(token))),
            Middleware(AuthContextMiddleware),
            Middleware(TokenGate, token_file=token_file),
        ],
        lifespan=lifespan,
    )
