"""A request the daemon will not serve is told what to do: pass the bearer token, found in this file; no OAuth.

Claude Code, given a bare 401, looks for OAuth metadata and then POSTs ``/register``; when those answered 401 it
reported "Dynamic Client Registration rejected (HTTP 401)". Here its sequence of requests, made with plain httpx
against the daemon's app under real uvicorn, ends at a 404 whose OAuth-shaped body explains the token.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import MCPServer

from tests.orchestrator.daemon.served_app import served

pytestmark = pytest.mark.anyio

TOKEN = "the-real-s3cret-token-value"
WRONG = "a-guessed-token-value"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "claude-code", "version": "2"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
OAUTH_PATHS = [
    ("GET", "/.well-known/oauth-protected-resource"),
    ("GET", "/.well-known/oauth-protected-resource/mcp"),
    ("GET", "/.well-known/oauth-authorization-server"),
    ("GET", "/.well-known/oauth-authorization-server/mcp"),
    ("GET", "/.well-known/openid-configuration"),
    ("POST", "/register"),
    ("GET", "/authorize"),
    ("POST", "/token"),
]


def echo() -> MCPServer:
    server = MCPServer("echo")

    @server.tool()
    async def say(text: str) -> dict[str, Any]:
        return {"said": text}

    return server


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    return tmp_path / "home" / "daemon.token"


@pytest.fixture
async def origin(token_file: Path) -> AsyncIterator[str]:
    async with served(echo(), TOKEN, token_file=token_file) as url:
        yield url


def client(token: str | None) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    return httpx.AsyncClient(headers=headers, trust_env=False, timeout=10)


def assert_explains(response: httpx.Response, token_file: Path, origin: str) -> str:
    body = response.json()
    assert isinstance(body["error"], str) and body["error"]
    text: str = body["error_description"]
    assert "Authorization: Bearer <token>" in text and str(token_file) in text
    assert "no OAuth" in text and f"{origin}/mcp" in text
    assert TOKEN not in response.text and WRONG not in response.text
    return text


async def test_a_request_without_the_token_is_told_to_pass_it_and_where_it_is(origin: str, token_file: Path) -> None:
    async with client(None) as anonymous:
        response = await anonymous.post(f"{origin}/mcp", json=INITIALIZE, headers=MCP_HEADERS)
        health = await anonymous.get(f"{origin}/health")
    assert response.status_code == 401 and health.status_code == 401
    text = assert_explains(response, token_file, origin)
    assert "needs its bearer token" in text
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith('Bearer error="invalid_token"')
    assert str(token_file) in challenge and "Authorization: Bearer <token>" in challenge
    # Nothing to discover: a resource_metadata pointer would start the OAuth dance.
    assert "resource_metadata" not in challenge


async def test_a_wrong_token_is_told_apart_and_never_echoed(origin: str, token_file: Path) -> None:
    async with client(WRONG) as wrong:
        response = await wrong.post(f"{origin}/mcp", json=INITIALIZE, headers=MCP_HEADERS)
    assert response.status_code == 401
    assert "not this Loom daemon's" in assert_explains(response, token_file, origin)
    assert WRONG not in response.headers["www-authenticate"] and TOKEN not in response.headers["www-authenticate"]


@pytest.mark.parametrize("token", [None, WRONG, TOKEN])
async def test_oauth_discovery_and_registration_answer_404_with_the_explanation(
    origin: str, token_file: Path, token: str | None
) -> None:
    async with client(token) as http:
        for method, path in OAUTH_PATHS:
            response = await http.request(method, f"{origin}{path}", json={} if method == "POST" else None)
            assert response.status_code == 404, path
            assert "www-authenticate" not in response.headers, path
            assert_explains(response, token_file, origin)


async def test_claude_codes_sequence_ends_at_a_404_it_can_show(origin: str, token_file: Path) -> None:
    # What Claude Code does with a 401 lacking resource_metadata: probe the metadata, then the default /register.
    registration = {"client_name": "Claude Code", "redirect_uris": ["http://localhost:5555/callback"]}
    async with client(None) as http:
        first = await http.post(f"{origin}/mcp", json=INITIALIZE, headers=MCP_HEADERS)
        probes = [await http.get(f"{origin}{path}") for _, path in OAUTH_PATHS if path.startswith("/.well-known")]
        register = await http.post(f"{origin}/register", json=registration)
    assert first.status_code == 401
    assert {p.status_code for p in probes} == {404}
    # An OAuth error response (RFC 7591 shape): a client that parses it shows error_description.
    assert register.status_code == 404 and set(register.json()) == {"error", "error_description"}
    assert_explains(register, token_file, origin)


async def test_other_paths_still_need_the_token(origin: str) -> None:
    async with client(None) as anonymous, client(TOKEN) as good:
        assert (await anonymous.get(f"{origin}/.well-known/other")).status_code == 401
        assert (await anonymous.get(f"{origin}/registered")).status_code == 401
        assert (await good.get(f"{origin}/health")).json() == {"ok": True}


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_token_is_never_logged_and_the_right_one_serves_both_eras(
    origin: str, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with client(WRONG) as wrong:
        await wrong.post(f"{origin}/mcp", json=INITIALIZE, headers=MCP_HEADERS)
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, trust_env=False) as http,
        Client(streamable_http_client(f"{origin}/mcp", http_client=http), mode=mode) as mcp,
    ):
        result = await mcp.call_tool("say", {"text": "hi"})
    assert result.structured_content == {"said": "hi"}
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert logged and TOKEN not in logged and WRONG not in logged
