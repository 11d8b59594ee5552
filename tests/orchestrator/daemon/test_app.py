"""The daemon's ASGI app in-process: token, Host/Origin checks, health, MCP in both eras, the request gate."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import MCPServer
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from orchestrator.daemon.app import LateMessageFilter, RequestGate, build_app

pytestmark = pytest.mark.anyio

TOKEN = "t0ken"
BASE = "http://127.0.0.1:7878"


def echo_server() -> MCPServer:
    server = MCPServer("echo")

    @server.tool()
    async def echo(text: str) -> dict[str, Any]:
        return {"echo": text}

    return server


@contextlib.asynccontextmanager
async def served(token: str | None = TOKEN) -> AsyncIterator[httpx2.AsyncClient]:
    server = echo_server()
    app = build_app(server, TOKEN, info={"pid": 42})
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with server.session_manager.run():  # ASGITransport does not run lifespans
        async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app), base_url=BASE, headers=headers) as http:
            yield http


async def test_every_route_needs_the_token() -> None:
    async with served(None) as anonymous:
        responses = [await anonymous.get("/health"), await anonymous.post("/mcp", json={}), await anonymous.get("/x")]
    for response in responses:
        assert response.status_code == 401
        assert response.headers["www-authenticate"].startswith('Bearer error="invalid_token"')
    async with served("wrong") as wrong:
        assert (await wrong.get("/health")).status_code == 401
    async with served() as client:
        health, elsewhere = await client.get("/health"), await client.get("/x")
    assert (health.status_code, health.json()) == (200, {"ok": True, "pid": 42})
    assert elsewhere.status_code == 404


async def test_foreign_hosts_and_origins_are_refused_before_anything_else() -> None:
    async with served(None) as anonymous:
        host = await anonymous.get("/health", headers={"Host": "evil.example"})
        origin = await anonymous.get("/health", headers={"Origin": "http://evil.example"})
        lookalike = await anonymous.get("/health", headers={"Origin": "http://127.0.0.1.evil.example"})
    assert (host.status_code, origin.status_code, lookalike.status_code) == (421, 403, 403)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_mcp_endpoint_serves_both_eras(mode: str) -> None:
    async with served() as http, Client(streamable_http_client(f"{BASE}/mcp", http_client=http), mode=mode) as client:
        result = await client.call_tool("echo", {"text": "hi"})
    assert result.structured_content == {"echo": "hi"}


def gated(app: ASGIApp) -> tuple[RequestGate, httpx2.AsyncClient]:
    gate = RequestGate(app)
    return gate, httpx2.AsyncClient(transport=httpx2.ASGITransport(gate), base_url=BASE)


async def test_closing_the_gate_ends_requests_in_flight_and_refuses_new_ones() -> None:
    entered = anyio.Event()

    async def forever(request: Request) -> Response:
        entered.set()
        await anyio.sleep(60)
        return JSONResponse({})

    gate, http = gated(Starlette(routes=[Route("/wait", forever)]))
    responses: list[httpx2.Response] = []

    async def request() -> None:
        responses.append(await http.get("/wait"))

    async with http, anyio.create_task_group() as tg:
        with anyio.fail_after(5):
            tg.start_soon(request)
            await entered.wait()
            gate.close()
        late = await http.get("/wait")
    assert [r.status_code for r in responses] == [503]
    assert late.status_code == 503 and "shutting down" in late.json()["error"]["message"]


async def test_closing_the_gate_completes_a_started_stream() -> None:
    streaming = anyio.Event()

    async def chunks() -> AsyncIterator[bytes]:
        yield b"data: one\n\n"
        streaming.set()
        await anyio.sleep(60)
        yield b"data: never\n\n"

    async def stream(request: Request) -> Response:
        return StreamingResponse(chunks(), media_type="text/event-stream")

    gate, http = gated(Starlette(routes=[Route("/stream", stream)]))
    responses: list[httpx2.Response] = []

    async def request() -> None:
        responses.append(await http.get("/stream"))

    async with http, anyio.create_task_group() as tg:
        with anyio.fail_after(5):
            tg.start_soon(request)
            await streaming.wait()
            gate.close()
    assert [(r.status_code, r.text) for r in responses] == [(200, "data: one\n\n")]


async def test_a_response_sent_after_the_request_was_answered_is_dropped() -> None:
    # What the SDK's transport does with a message posted to a session that has just closed: it answers 202, then
    # tries a 500 on the same request. uvicorn raises on the second start and logs it with a traceback.
    async def late_error(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 202, "headers": []})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        await send({"type": "http.response.start", "status": 500, "headers": []})
        await send({"type": "http.response.body", "body": b"late", "more_body": False})
        raise anyio.ClosedResourceError  # then it hands the error to the closed session's stream

    sent: list[Message] = []

    async def strict_send(message: Message) -> None:  # as uvicorn's h11 protocol checks
        if sent and sent[-1]["type"] == "http.response.body" and not sent[-1].get("more_body", False):
            raise RuntimeError(f"Unexpected ASGI message {message['type']!r} sent, after response already completed.")
        sent.append(message)

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    scope: Scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": []}
    await RequestGate(late_error)(scope, receive, strict_send)
    assert [m.get("status") for m in sent if m["type"] == "http.response.start"] == [202]

    async def fails_before_answering(scope: Scope, receive: Receive, send: Send) -> None:
        raise anyio.ClosedResourceError

    with pytest.raises(anyio.ClosedResourceError):  # unanswered, it is a fault: uvicorn answers 500 and logs it
        await RequestGate(fails_before_answering)(scope, receive, strict_send)


def test_the_sdks_late_message_error_is_kept_at_debug_without_its_traceback() -> None:
    build_app(echo_server(), TOKEN)  # installs the filter on the SDK's transport logger, once
    sdk_log = logging.getLogger("mcp.server.streamable_http")
    assert sum(isinstance(f, LateMessageFilter) for f in sdk_log.filters) == 1
    build_app(echo_server(), TOKEN)
    assert sum(isinstance(f, LateMessageFilter) for f in sdk_log.filters) == 1
    seen: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    handler = Keep()
    sdk_log.addHandler(handler)
    level = sdk_log.level
    try:
        sdk_log.setLevel(logging.INFO)
        try:
            raise anyio.ClosedResourceError
        except anyio.ClosedResourceError:
            sdk_log.exception("Error handling POST request")
        try:
            raise ValueError("a real fault")
        except ValueError:
            sdk_log.exception("Error handling POST request")
        sdk_log.setLevel(logging.DEBUG)
        try:
            raise anyio.ClosedResourceError
        except anyio.ClosedResourceError:
            sdk_log.exception("Error handling POST request")
    finally:
        sdk_log.removeHandler(handler)
        sdk_log.setLevel(level)
    # Hidden at INFO; a real fault still an ERROR with its traceback; at DEBUG, shown without one.
    assert [(r.levelname, r.exc_info is not None) for r in seen] == [("ERROR", True), ("DEBUG", False)]
    assert "after its session closed" in seen[1].getMessage()
