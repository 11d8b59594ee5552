"""The face's loom:// resources, in both eras: sessions, a session's state and transcript (paged), subscriptions."""

from __future__ import annotations

import contextlib
import json
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, MCPDeprecationWarning
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, ResourceUpdatedNotification, TextResourceContents

from orchestrator.events import UserMessage
from orchestrator.face.server import build_face
from orchestrator.face.subscriptions import MAX_LISTENED
from orchestrator.face.transcript import PAGE_EVENTS
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.host import SessionHost
from tests.mcp_calls import call
from tests.orchestrator.daemon.served_app import served
from tests.orchestrator.face.test_face import script

pytestmark = pytest.mark.anyio

ERAS = ["legacy", "auto"]


@contextlib.asynccontextmanager
async def loom_face(tmp_path: Path) -> AsyncIterator[tuple[SessionHost, MCPServer]]:
    """A face over a fresh runtime in ``tmp_path/home`` (and its host, for what a test sets up directly)."""
    async with embedded_runtime(tmp_path / "home") as runtime, SessionHost(runtime) as host:
        yield host, build_face(host)


async def text_of(client: Client, uri: str) -> str:
    (contents,) = (await client.read_resource(uri)).contents
    assert isinstance(contents, TextResourceContents)
    return contents.text


@pytest.mark.parametrize("mode", ERAS)
async def test_a_session_is_listed_and_read_as_its_state_and_transcript(tmp_path: Path, mode: str) -> None:
    model = script(tmp_path, [{"text": "the answer is 42"}])
    async with loom_face(tmp_path) as (_, face), Client(face, mode=mode) as client:
        sid = (await call(client, "create_session", cwd=str(tmp_path), model=model, mode="bypass"))["session_id"]
        await call(client, "send_message", session_id=sid, text="what is the answer?", wait_s=10)
        listed = {str(r.uri) for r in (await client.list_resources()).resources}
        templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
        state = json.loads(await text_of(client, f"loom://sessions/{sid}/state"))
        transcript = await text_of(client, f"loom://sessions/{sid}/transcript")
        sessions = json.loads(await text_of(client, "loom://sessions"))
        info = await call(client, "get_session", session_id=sid)
    assert {"loom://sessions", f"loom://sessions/{sid}/state", f"loom://sessions/{sid}/transcript"} <= listed
    assert "loom://sessions/{session_id}/transcript{?before_seq}" in templates
    assert state == info
    assert "what is the answer?" in transcript and "the answer is 42" in transcript
    assert "This is the start of the session." in transcript
    assert [s["session_id"] for s in sessions["sessions"]] == [sid]
    assert sessions["sessions"][0]["transcript_uri"] == f"loom://sessions/{sid}/transcript"


@pytest.mark.parametrize("mode", ERAS)
async def test_an_unknown_session_or_uri_is_an_invalid_params_error_that_says_where_to_look(
    tmp_path: Path, mode: str
) -> None:
    async with loom_face(tmp_path) as (_, face), Client(face, mode=mode) as client:
        errors = []
        for uri in ["loom://sessions/s_nope/state", "loom://nothing", "loom://sessions/s_x/transcript?before_seq=x"]:
            with pytest.raises(MCPError) as caught:
                await client.read_resource(uri)
            errors.append(caught.value)
    assert [e.error.code for e in errors] == [INVALID_PARAMS] * 3
    assert "s_nope" in errors[0].error.message and "list_sessions" in errors[0].error.message
    assert "resources/list" in errors[1].error.message
    assert "before_seq" in errors[2].error.message


async def test_a_long_transcript_is_paged_and_each_page_names_the_one_before(tmp_path: Path) -> None:
    async with loom_face(tmp_path) as (host, face), Client(face) as client:
        sid = (await call(client, "create_session", cwd=str(tmp_path), model="scripted:demo"))["session_id"]
        await host.runtime.log.append(
            *(UserMessage(session_id=sid, run_id="r_x", text=f"message {i}") for i in range(PAGE_EVENTS + 30))
        )
        newest = await text_of(client, f"loom://sessions/{sid}/transcript")
        older_uri = newest.split("Older events: read ", 1)[1].split("\n", 1)[0]
        older = await text_of(client, older_uri)
    assert f"message {PAGE_EVENTS + 29}" in newest and "message 0\n" not in newest
    assert newest.count("] user") == PAGE_EVENTS
    assert older_uri.startswith(f"loom://sessions/{sid}/transcript?before_seq=")
    assert "message 0\n" in older and f"message {PAGE_EVENTS + 29}" not in older
    assert "This is the start of the session." in older


async def test_a_legacy_subscriber_hears_of_a_session_event_and_stops_hearing_after_unsubscribing(
    tmp_path: Path,
) -> None:
    updated: list[str] = []
    heard_one = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, ResourceUpdatedNotification):
            updated.append(str(message.params.uri))
            heard_one.set()

    async with loom_face(tmp_path) as (host, face), Client(face, mode="legacy", message_handler=on_message) as client:
        sid = (await call(client, "create_session", cwd=str(tmp_path), model="scripted:demo"))["session_id"]
        uri = f"loom://sessions/{sid}/transcript"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)  # removed in 2026-07-28, current in this era
            await client.subscribe_resource(uri)
            await host.runtime.log.append(UserMessage(session_id=sid, run_id="r_x", text="hello"))
            with anyio.fail_after(5):
                await heard_one.wait()
            await client.unsubscribe_resource(uri)
            heard = list(updated)
            await host.runtime.log.append(UserMessage(session_id=sid, run_id="r_x", text="again"))
            await anyio.sleep(0.5)
            with pytest.raises(MCPError) as refused:
                await client.subscribe_resource("loom://sessions")
    assert heard == [uri]
    assert updated == heard  # nothing after unsubscribing
    assert refused.value.error.code == INVALID_PARAMS and "state" in refused.value.error.message


async def test_a_2026_listener_hears_of_a_session_event_on_its_listen_stream(tmp_path: Path) -> None:
    async with loom_face(tmp_path) as (host, face), Client(face) as client:
        sid = (await call(client, "create_session", cwd=str(tmp_path), model="scripted:demo"))["session_id"]
        uri = f"loom://sessions/{sid}/state"
        async with client.listen(resource_subscriptions=[uri]) as subscription:
            await host.runtime.log.append(UserMessage(session_id=sid, run_id="r_x", text="hello"))
            with anyio.fail_after(5):
                event = await subscription.__anext__()
        state = json.loads(await text_of(client, uri))
    assert getattr(event, "uri", None) == uri
    assert state["last_seq"] >= 3


@pytest.mark.parametrize("mode", ERAS)
async def test_over_the_daemons_http_a_subscriber_hears_of_a_run_of_the_session(tmp_path: Path, mode: str) -> None:
    updated: list[str] = []
    heard = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, ResourceUpdatedNotification):
            updated.append(str(message.params.uri))
            heard.set()

    model = script(tmp_path, [{"text": "done"}])
    headers = {"Authorization": "Bearer t0ken"}
    async with loom_face(tmp_path) as (_, face), served(face, "t0ken") as origin:
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as http,
            Client(
                streamable_http_client(f"{origin}/mcp", http_client=http), mode=mode, message_handler=on_message
            ) as client,
        ):
            sid = (await call(client, "create_session", cwd=str(tmp_path), model=model, mode="bypass"))["session_id"]
            uri = f"loom://sessions/{sid}/transcript"
            if mode == "legacy":
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", MCPDeprecationWarning)
                    await client.subscribe_resource(uri)
                await call(client, "send_message", session_id=sid, text="go", wait_s=10)
                with anyio.fail_after(10):
                    await heard.wait()
            else:
                async with client.listen(resource_subscriptions=[uri]) as subscription:
                    await call(client, "send_message", session_id=sid, text="go", wait_s=10)
                    with anyio.fail_after(10):
                        updated.append(str(getattr(await subscription.__anext__(), "uri", "")))
            transcript = await text_of(client, uri)
    assert updated[0] == uri
    assert "done" in transcript


async def test_a_listen_stream_naming_too_many_sessions_is_refused_and_an_unknown_one_never_fires(
    tmp_path: Path,
) -> None:
    async with loom_face(tmp_path) as (host, face), Client(face) as client:
        sid = (await call(client, "create_session", cwd=str(tmp_path), model="scripted:demo"))["session_id"]
        flood = [f"loom://sessions/s_{i:06d}/state" for i in range(MAX_LISTENED + 1)]
        with pytest.raises(MCPError) as refused:
            async with client.listen(resource_subscriptions=flood):
                pass
        mine = f"loom://sessions/{sid}/state"
        async with client.listen(resource_subscriptions=["loom://sessions/s_made_up/state", mine]) as subscription:
            await host.runtime.log.append(UserMessage(session_id="s_made_up", run_id="r_x", text="never seen"))
            await host.runtime.log.append(UserMessage(session_id=sid, run_id="r_x", text="seen"))
            with anyio.fail_after(5):
                first = await subscription.__anext__()
    assert refused.value.error.code == INVALID_PARAMS and str(MAX_LISTENED) in refused.value.error.message
    assert getattr(first, "uri", None) == mine


async def test_a_uri_or_prompt_argument_that_is_not_text_is_refused_in_the_callers_terms(tmp_path: Path) -> None:
    # Legacy: a 2026-07-28 client refuses to send it at all (the URI and name also travel in a header).
    async with loom_face(tmp_path) as (_, face), Client(face, mode="legacy") as client:
        with pytest.raises(MCPError) as uri:
            await client.read_resource("loom://sessions/s_\ud800/state")
        with pytest.raises(MCPError) as argument:
            await client.get_prompt("delegate_task", {"task": "x\udfff", "cwd": "/a"})
    assert uri.value.error.code == INVALID_PARAMS and "lone surrogate" in uri.value.error.message
    assert argument.value.error.code == INVALID_PARAMS and "arguments.task" in argument.value.error.message
