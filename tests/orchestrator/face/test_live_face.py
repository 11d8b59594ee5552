"""``read_events``' live part, through the real face in-process: the step in flight, its cursor, its waits."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from clients.loom import LiveFollower
from orchestrator.events import (
    AssistantMessage,
    ModelRetry,
    RunStarted,
    SessionCreated,
    TextDelta,
    ToolCallDelta,
)
from orchestrator.face.live import read_page
from orchestrator.face.server import build_face
from orchestrator.messages import Message, TextBlock, ToolUseBlock, Usage
from orchestrator.protocol import EVENT_TYPES
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.host import SessionHost
from tests.mcp_calls import call

pytestmark = pytest.mark.anyio

PIECE = 11
WHOLE = "".join(p.ljust(PIECE) for p in ["The answer", "comes in", "five slow", "pieces,", "then ends."])
"""Five pieces of 11 characters: the scripted model streams one every ``chunk_delay_s``."""


@contextlib.asynccontextmanager
async def face(tmp_path: Path) -> AsyncIterator[tuple[SessionHost, Client]]:
    async with embedded_runtime(tmp_path / "home") as runtime, SessionHost(runtime) as host:
        async with Client(build_face(host)) as client:
            yield host, client


async def slow_session(client: Client, tmp_path: Path, delay_s: float) -> str:
    (tmp_path / "work").mkdir(exist_ok=True)
    turn = {"text": WHOLE, "chunk_chars": PIECE, "chunk_delay_s": delay_s}
    script = tmp_path / "slow.json"
    script.write_text(json.dumps({"turns": [turn]}))
    session = await call(
        client, "create_session", cwd=str(tmp_path / "work"), model=f"scripted:{script}", mode="bypass"
    )
    return str(session["session_id"])


async def test_a_long_poll_ends_as_soon_as_more_text_is_written(tmp_path: Path) -> None:
    async with face(tmp_path) as (_, client):
        sid = await slow_session(client, tmp_path, delay_s=0.3)
        await call(client, "send_message", session_id=sid, text="go")
        after, cursor, text, waits = 0, "", "", []
        message: dict[str, Any] | None = None
        with anyio.fail_after(20):
            while message is None:
                started = time.perf_counter()
                page = await call(client, "read_events", session_id=sid, after_seq=after, wait_s=30, live_cursor=cursor)
                waits.append(time.perf_counter() - started)
                after = page["next_after_seq"]
                message = next((e for e in page["events"] if e["type"] == "assistant_message"), None)
                live = page["live"]
                if live is not None:
                    assert live["text_offset"] == len(text)  # only what we do not hold is sent
                    text += live["text"]
                    cursor = live["cursor"]
                else:
                    cursor = ""
    assert message["message"]["content"][0]["text"] == WHOLE
    assert WHOLE.startswith(text) and len(text) >= len(WHOLE) - PIECE  # all but the last piece came live
    assert max(waits) < 1.0  # every wait ended with the next piece, 0.3 s apart, not after wait_s


async def test_a_caller_without_a_cursor_gets_all_the_text_so_far(tmp_path: Path) -> None:
    async with face(tmp_path) as (_, client):
        sid = await slow_session(client, tmp_path, delay_s=0.2)
        await call(client, "send_message", session_id=sid, text="go")
        page = await call(client, "read_events", session_id=sid)
        with anyio.fail_after(10):
            while page["live"] is None or len(page["live"]["text"]) < 3 * PIECE:
                # nothing new is stored after the cursor: the wait ends when the text grows
                page = await call(client, "read_events", session_id=sid, after_seq=page["next_after_seq"], wait_s=5)
        again = await call(client, "read_events", session_id=sid, after_seq=page["next_after_seq"], wait_s=5)
        short = await call(client, "read_events", session_id=sid, limit=1)
    assert page["live"]["text_offset"] == 0 and page["live"]["step"] == 1
    assert again["live"]["text"].startswith(page["live"]["text"]) and len(again["live"]["text"]) > 3 * PIECE
    assert short["live"] is None  # a page that stops short of the newest event has no live part


async def test_streamed_tool_arguments_ride_in_the_live_part_until_the_message_is_stored(tmp_path: Path) -> None:
    async with face(tmp_path) as (host, client):
        sid = await slow_session(client, tmp_path, delay_s=0.3)
        run = await call(client, "send_message", session_id=sid, text="go")
        page = await call(client, "read_events", session_id=sid)
        with anyio.fail_after(10):
            while page["live"] is None:
                page = await call(client, "read_events", session_id=sid, wait_s=5, live_cursor="")
        log = host.runtime.log
        for piece in ('{"path": ', '"a.txt"}'):
            first = piece.startswith("{")
            log.publish_live(
                ToolCallDelta(
                    session_id=sid,
                    run_id=run["run_id"],
                    step=1,
                    index=0,
                    call_id="toolu_1" if first else "",
                    name="fs__read" if first else "",
                    arguments=piece,
                )
            )
        streamed = await call(client, "read_events", session_id=sid, after_seq=page["next_after_seq"])
        final = await call(client, "get_run", run_id=run["run_id"], wait_s=10)
        after = await call(client, "read_events", session_id=sid)
    (call_so_far,) = streamed["live"]["tool_calls"]
    assert call_so_far == {
        "index": 0,
        "call_id": "toolu_1",
        "name": "fs__read",
        "arguments_so_far": '{"path": "a.txt"}',
    }
    assert final["status"] == "completed" and after["live"] is None


async def test_a_retried_model_call_streams_again_and_the_follower_shows_each_attempt_once(tmp_path: Path) -> None:
    async with embedded_runtime(tmp_path / "home") as runtime:
        log = runtime.log
        sid, rid = "s_live", "r_live"
        await log.append(SessionCreated(session_id=sid, cwd=str(tmp_path), model="scripted:x"))
        await log.append(RunStarted(session_id=sid, run_id=rid, model="scripted:x", max_steps=5))
        follower = LiveFollower(sid, every_message=True)
        shown: list[str] = []

        async def poll() -> None:
            page = await read_page(log, sid, follower.cursor, 0, 200, follower.live_cursor)
            shown.extend(e.text for e in follower.take(page) if isinstance(e, TextDelta))

        log.publish_live(TextDelta(session_id=sid, run_id=rid, step=1, text="first try, "))
        await poll()
        first = log.live(sid)
        await log.append(ModelRetry(session_id=sid, run_id=rid, step=1, attempt=1, delay_s=0.1, error="overloaded"))
        assert log.live(sid) is None
        log.publish_live(TextDelta(session_id=sid, run_id=rid, step=1, text="second "))
        await poll()
        log.publish_live(TextDelta(session_id=sid, run_id=rid, step=1, text="try"))
        second = log.live(sid)
        message = Message(role="assistant", content=[TextBlock(text="second try, whole")])
        stored = AssistantMessage(
            session_id=sid, run_id=rid, step=1, message=message, stop_reason="end_turn", usage=Usage(), duration_ms=1
        )
        await log.append(stored)
        await poll()
        with pytest.raises(ValueError, match="live-only"):
            await log.append(TextDelta(session_id=sid, run_id=rid, step=1, text="x"))
    assert first is not None and second is not None and first.after_seq == 2 and second.after_seq == 3
    assert second.text == "second try"
    # The first attempt stays shown (as an embedded run shows it); then the second, and with the stored
    # message what of it was not shown yet ("try" was written after the last poll).
    assert shown == ["first try, ", "second ", "try, whole"]
    assert log.live(sid) is None


async def test_a_followers_tool_arguments_are_completed_from_the_stored_call_once(tmp_path: Path) -> None:
    arguments = {"path": "notes/plan.md", "content": "step one\nstep two"}
    whole = json.dumps(arguments, ensure_ascii=False)
    async with embedded_runtime(tmp_path / "home") as runtime:
        log = runtime.log
        sid, rid = "s_args", "r_args"
        await log.append(SessionCreated(session_id=sid, cwd=str(tmp_path), model="scripted:x"))
        await log.append(RunStarted(session_id=sid, run_id=rid, model="scripted:x", max_steps=5))
        early, late, watcher = (
            LiveFollower(sid, every_message=True),
            LiveFollower(sid, every_message=True),
            LiveFollower(sid),
        )

        async def poll(follower: LiveFollower) -> list[ToolCallDelta]:
            page = await read_page(log, sid, follower.cursor, 0, 200, follower.live_cursor)
            return [e for e in follower.take(page) if isinstance(e, ToolCallDelta)]

        log.publish_live(
            ToolCallDelta(session_id=sid, run_id=rid, step=1, index=0, call_id="c1", name="fs__write", arguments="")
        )
        log.publish_live(ToolCallDelta(session_id=sid, run_id=rid, step=1, index=0, arguments=whole[:12]))
        seen_early = await poll(early)  # saw the name and the first piece live; the last pieces came too late
        log.publish_live(ToolCallDelta(session_id=sid, run_id=rid, step=1, index=0, arguments=whole[12:]))
        message = Message(role="assistant", content=[ToolUseBlock(id="c1", name="fs__write", input=arguments)])
        await log.append(
            AssistantMessage(
                session_id=sid,
                run_id=rid,
                step=1,
                message=message,
                stop_reason="tool_use",
                usage=Usage(),
                duration_ms=1,
            )
        )
        seen_early += await poll(early)
        seen_late = await poll(late)  # attached after the call was stored: every_message gives it whole
        seen_watcher = await poll(watcher)  # history replayed to an attach: the stored message alone

    assert seen_early[0].name == "fs__write" and seen_early[0].call_id == "c1"
    assert "".join(e.arguments for e in seen_early) == whole  # the rest once, nothing doubled
    assert [(e.call_id, e.name, e.arguments) for e in seen_late] == [("c1", "fs__write", whole)]
    assert seen_watcher == []


async def test_read_events_declares_its_events_kinds_in_a_schema_cheap_to_check(tmp_path: Path) -> None:
    async with face(tmp_path) as (_, client):
        tools = {t.name: t for t in (await client.list_tools()).tools}
    schema = tools["read_events"].output_schema
    assert schema is not None and len(json.dumps(schema)) < 6000
    item = schema["properties"]["events"]["items"]
    assert item["properties"]["type"]["enum"] == list(EVENT_TYPES)
    assert {"text_delta", "tool_call_delta", "assistant_message"} <= set(EVENT_TYPES)
    assert "live" in schema["properties"] and "live_cursor" in tools["read_events"].input_schema["properties"]
