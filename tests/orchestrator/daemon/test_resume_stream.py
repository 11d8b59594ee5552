"""A 2025-era client whose SSE stream drops mid-way resumes it with ``Last-Event-ID`` and misses nothing.

The client is plain httpx speaking the legacy handshake (``initialize``, ``Mcp-Session-Id``, POST and GET SSE), the
server the daemon's app under real uvicorn, a test tool paced by the test so that the drop falls mid-call.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
import pytest
from mcp import MCPDeprecationWarning
from mcp.server.mcpserver import Context, MCPServer

from orchestrator.daemon.resume import BoundedEventStore
from tests.orchestrator.daemon.served_app import served

pytestmark = pytest.mark.anyio

TOKEN = "t0ken"
SSE = "text/event-stream"


@dataclass
class Pace:
    """Gates the test tools wait on, so that the test drops its stream between two messages."""

    go: anyio.Event

    @classmethod
    def new(cls) -> Pace:
        return cls(anyio.Event())


def paced_server(pace: Pace) -> MCPServer:
    server = MCPServer("paced")

    @server.tool()
    async def steps(count: int, ctx: Context) -> dict[str, Any]:
        await ctx.report_progress(1, count, "step 1")
        await pace.go.wait()
        for i in range(2, count + 1):
            await ctx.report_progress(i, count, f"step {i}")
        return {"done": count}

    @server.tool()
    async def announce(count: int, ctx: Context) -> str:
        # Not tied to the request: these go to the session's standalone GET stream.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await ctx.session.send_log_message("info", "tick 1")
            await pace.go.wait()
            for i in range(2, count + 1):
                await ctx.session.send_log_message("info", f"tick {i}")
        return "announced"

    return server


@dataclass
class Event:
    id: str | None
    data: dict[str, Any] | None


async def events(response: httpx.Response) -> AsyncIterator[Event]:
    """The SSE events of ``response`` (a priming event has empty data)."""
    event_id: str | None = None
    data: list[str] = []
    async for line in response.aiter_lines():
        if line.startswith("id:"):
            event_id = line[3:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
        elif line == "":
            if event_id is not None or data:
                text = "\n".join(data)
                yield Event(event_id, json.loads(text) if text else None)
            event_id, data = None, []


class LegacyClient:
    """A 2025-era client of streamable HTTP, by hand."""

    def __init__(self, http: httpx.AsyncClient, url: str, version: str) -> None:
        self.http, self.url, self.version = http, url, version
        self.session_id = ""
        self.next_id = 0

    def headers(self, **extra: str) -> dict[str, str]:
        headers = {"Accept": f"application/json, {SSE}", "Content-Type": "application/json", **extra}
        if self.session_id:
            headers |= {"Mcp-Session-Id": self.session_id, "Mcp-Protocol-Version": self.version}
        return headers

    async def initialize(self) -> None:
        params = {"protocolVersion": self.version, "capabilities": {}, "clientInfo": {"name": "old", "version": "1"}}
        response = await self.http.post(self.url, json=self.request("initialize", params), headers=self.headers())
        assert response.status_code == 200, response.text
        self.session_id = response.headers["mcp-session-id"]
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await self.http.post(self.url, json=note, headers=self.headers())).status_code == 202

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        return {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}

    async def post(self, message: dict[str, Any]) -> httpx.Response:
        """POST ``message`` and read the whole response."""
        return await self.http.post(self.url, json=message, headers=self.headers())

    def call(self, tool: str, arguments: dict[str, Any], progress: str | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {"name": tool, "arguments": arguments}
        if progress is not None:
            params["_meta"] = {"progressToken": progress}
        return self.request("tools/call", params)


def progress_of(event: Event) -> float | None:
    if event.data and event.data.get("method") == "notifications/progress":
        return float(event.data["params"]["progress"])
    return None


def log_of(event: Event) -> str | None:
    if event.data and event.data.get("method") == "notifications/message":
        return str(event.data["params"]["data"])
    return None


def legacy(origin: str, version: str) -> tuple[httpx.AsyncClient, LegacyClient]:
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, trust_env=False, timeout=10)
    return http, LegacyClient(http, f"{origin}/mcp", version)


async def resumed(client: LegacyClient, last_event_id: str, until: int) -> list[Event]:
    """GET with ``Last-Event-ID``: the events replayed and then live, up to ``until`` of them."""
    got: list[Event] = []
    headers = client.headers(**{"Accept": SSE, "Last-Event-ID": last_event_id})
    with anyio.fail_after(10):
        async with client.http.stream("GET", client.url, headers=headers) as response:
            assert response.status_code == 200, await response.aread()
            async for event in events(response):
                if event.data is not None:
                    got.append(event)
                if len(got) == until:
                    break
    return got


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18", "2025-03-26"])
async def test_a_dropped_post_stream_resumes_from_last_event_id(version: str) -> None:
    pace = Pace.new()
    async with served(paced_server(pace), TOKEN) as origin:
        http, client = legacy(origin, version)
        async with http:
            await client.initialize()
            seen: list[Event] = []
            with anyio.fail_after(10):
                call = client.call("steps", {"count": 4}, progress="p1")
                async with http.stream("POST", client.url, json=call, headers=client.headers()) as response:
                    assert response.headers["content-type"].startswith(SSE)
                    async for event in events(response):
                        seen.append(event)
                        if progress_of(event) == 1:
                            break  # the connection drops here, mid-call
            assert all(event.id for event in seen), "every event has an id"
            pace.go.set()  # the tool goes on while nobody is connected
            rest = await resumed(client, seen[-1].id or "", until=4)
    assert [progress_of(e) for e in rest[:3]] == [2.0, 3.0, 4.0]
    final = rest[3].data or {}
    assert final["id"] == call["id"] and final["result"]["structuredContent"] == {"done": 4}
    ids = [int(e.id or 0) for e in seen + rest]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)


async def test_a_dropped_get_stream_resumes_from_last_event_id() -> None:
    pace = Pace.new()
    async with served(paced_server(pace), TOKEN) as origin:
        http, client = legacy(origin, "2025-11-25")
        async with http, anyio.create_task_group() as tg:
            await client.initialize()
            first: list[Event] = []
            with anyio.fail_after(10):
                async with http.stream("GET", client.url, headers=client.headers(Accept=SSE)) as stream:
                    tg.start_soon(client.post, client.call("announce", {"count": 3}))
                    async for event in events(stream):
                        if log_of(event) == "tick 1":
                            first.append(event)
                            break
            pace.go.set()
            rest = await resumed(client, first[0].id or "", until=2)
    assert [log_of(e) for e in rest] == ["tick 2", "tick 3"]


async def test_a_session_cannot_resume_from_another_sessions_events() -> None:
    pace = Pace.new()
    async with served(paced_server(pace), TOKEN) as origin:
        http_a, a = legacy(origin, "2025-11-25")
        http_b, b = legacy(origin, "2025-11-25")
        async with http_a, http_b:
            await a.initialize()
            await b.initialize()
            seen: list[Event] = []
            with anyio.fail_after(10):
                # Both sessions' first call has JSON-RPC id 2: the same stream name to the SDK.
                call = a.call("steps", {"count": 2}, progress="pa")
                async with http_a.stream("POST", a.url, json=call, headers=a.headers()) as response:
                    async for event in events(response):
                        seen.append(event)
                        if progress_of(event) == 1:
                            break
            stolen = await http_b.get(b.url, headers=b.headers(**{"Accept": SSE, "Last-Event-ID": seen[0].id or ""}))
            unknown = await http_a.get(a.url, headers=a.headers(**{"Accept": SSE, "Last-Event-ID": "999999"}))
            pace.go.set()
            mine = await resumed(a, seen[-1].id or "", until=2)
    for refused in (stolen, unknown):
        assert refused.status_code == 400
        assert "cannot resume" in refused.json()["error"]["message"]
    assert progress_of(mine[0]) == 2.0 and (mine[1].data or {})["result"]["structuredContent"] == {"done": 2}


async def test_the_store_is_bounded_per_stream_per_session_and_in_all() -> None:
    store = BoundedEventStore(per_stream=3, streams_per_session=2, total=5)
    pace = Pace.new()
    pace.go.set()
    async with served(paced_server(pace), TOKEN, event_store=store) as origin:
        http, client = legacy(origin, "2025-11-25")
        async with http:
            await client.initialize()
            for _ in range(3):
                reply = await http.post(
                    client.url, json=client.call("steps", {"count": 6}, "p"), headers=client.headers()
                )
                assert reply.status_code == 200
            assert store.held <= 5
            # The first call's stream was evicted: resuming it is refused, not answered with an empty stream.
            old = await http.get(client.url, headers=client.headers(**{"Accept": SSE, "Last-Event-ID": "1"}))
    assert old.status_code == 400
