"""``read_events(stream=True)`` through the real face in-process, where the caller sends no progress token.

In-process MCP calls carry no progress token, so the face cannot push pages: ``stream=True`` must then answer
as a long-poll does, and a streaming follower still gets everything (pushing over HTTP is in
``tests/orchestrator/daemon/test_streamed_events.py``).
"""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from clients.loom import LiveFollower, LoomClient
from orchestrator.events import AssistantMessage, Event, RunFinished, TextDelta
from tests.mcp_calls import call
from tests.orchestrator.face.test_live_face import WHOLE, face, slow_session

pytestmark = pytest.mark.anyio


async def test_a_streaming_follower_without_pushes_still_gets_every_piece_once(tmp_path: Path) -> None:
    async with face(tmp_path) as (_, client):
        sid = await slow_session(client, tmp_path, delay_s=0.1)
        loom = LoomClient(client, on_daemon=False)
        follower = LiveFollower(sid)
        await follower.next(loom, 0)
        shown: list[Event] = []
        await call(client, "send_message", session_id=sid, text="go")
        with anyio.fail_after(20):
            while not any(isinstance(e, RunFinished) for e in shown):
                await follower.stream(loom, 30, shown.extend)
    text = "".join(e.text for e in shown if isinstance(e, TextDelta))
    stored = next(e for e in shown if isinstance(e, AssistantMessage))
    assert text == WHOLE == stored.message.text


async def test_without_a_progress_token_a_streamed_read_is_a_long_poll(tmp_path: Path) -> None:
    async with face(tmp_path) as (_, client):
        sid = await slow_session(client, tmp_path, delay_s=0.3)
        first = await call(client, "read_events", session_id=sid)
        await call(client, "send_message", session_id=sid, text="go")
        started = time.perf_counter()
        page = await call(
            client, "read_events", session_id=sid, after_seq=first["next_after_seq"], wait_s=20, stream=True
        )
    assert time.perf_counter() - started < 5  # it answered with the first change, as without stream
    assert page["events"] or page["live"]
