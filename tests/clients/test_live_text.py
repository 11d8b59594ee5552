"""Live text through the real daemon over HTTP: followers get the assistant's text while it is written.

A scripted model writes a long answer slowly. One follower is there from the start, one attaches in
the middle (over the handshake era), one drops its connection in the middle and reconnects with its
cursors: each reassembles exactly the stored ``assistant_message``, and each had text before that
message existed (its ``ts`` is taken when the model's answer is complete, before it is stored).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest
from mcp import Client

from clients.loom import LiveFollower, LoomClient
from orchestrator.events import EVENT_ADAPTER, AssistantMessage, RunFinished, TextDelta
from tests.clients.cli_support import make_project, write_script
from tests.mcp_calls import call
from tests.orchestrator.daemon.daemon_process import Daemon, mcp_client, running_daemon

pytestmark = pytest.mark.timeout(120)

LONG = " ".join(f"word{i}" for i in range(240))
"""About 1,900 characters: 120 pieces of 16, one every 20 ms, so about 2.4 s of writing."""
SLOW = {"text": LONG, "chunk_chars": 16, "chunk_delay_s": 0.02}


@dataclass
class Seen:
    """What one follower was given: every text delta with the wall-clock time it arrived."""

    deltas: list[tuple[float, str]] = field(default_factory=list[tuple[float, str]])
    message: AssistantMessage | None = None
    grew: anyio.Event = field(default_factory=anyio.Event)
    """Set when text comes (and replaced by a fresh one)."""

    @property
    def text(self) -> str:
        return "".join(text for _, text in self.deltas)


async def follow(client: Client, follower: LiveFollower, seen: Seen, *, until_chars: int | None = None) -> None:
    """Follow until the run finishes (or, with ``until_chars``, until that much text has come)."""
    while True:
        for event in await follower.next(LoomClient(client, on_daemon=True), 10):
            if isinstance(event, TextDelta):
                seen.deltas.append((time.time(), event.text))
                seen.grew.set()
                seen.grew = anyio.Event()
            elif isinstance(event, AssistantMessage):
                seen.message = event
            elif isinstance(event, RunFinished):
                return
        if until_chars is not None and len(seen.text) >= until_chars:
            return


async def wait_for_text(seen: Seen, chars: int) -> None:
    with anyio.fail_after(20):
        while len(seen.text) < chars:
            await seen.grew.wait()


async def stored_message(client: Client, session_id: str) -> AssistantMessage:
    page = await call(client, "read_events", session_id=session_id)
    (message,) = [e for e in map(EVENT_ADAPTER.validate_python, page["events"]) if isinstance(e, AssistantMessage)]
    return message


async def drive(daemon: Daemon, project: Path, model: str) -> tuple[AssistantMessage, Seen, Seen, Seen, int]:
    from_start, from_middle, reconnected = Seen(), Seen(), Seen()
    async with mcp_client(daemon, "auto") as client:
        session = await call(client, "create_session", cwd=str(project), model=model, mode="bypass")
        sid = session["session_id"]

        async def reconnecting() -> None:
            follower = LiveFollower(sid)
            async with mcp_client(daemon, "auto") as first:
                await follow(first, follower, reconnected, until_chars=len(LONG) // 2)
            async with mcp_client(daemon, "auto") as second:  # a new connection, the same cursors
                await follow(second, follower, reconnected)

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(follow, client, LiveFollower(sid), from_start)
                tg.start_soon(reconnecting)
                await call(client, "send_message", session_id=sid, text="write a lot")
                await wait_for_text(from_start, len(LONG) // 3)
                held_when_attaching = len(from_start.text)
                async with mcp_client(daemon, "legacy") as late:
                    await follow(late, LiveFollower(sid), from_middle)
        return await stored_message(client, sid), from_start, from_middle, reconnected, held_when_attaching


def test_followers_from_the_start_the_middle_and_a_reconnect_reassemble_the_stored_text(tmp_path: Path) -> None:
    project, home = make_project(tmp_path / "p"), tmp_path / "home"
    script = write_script(tmp_path / "slow.json", [SLOW])
    with running_daemon(home, tmp_path) as daemon:
        stored, from_start, from_middle, reconnected, held = anyio.run(drive, daemon, project, f"scripted:{script}")

    assert stored.message.text == LONG
    for seen in (from_start, from_middle, reconnected):
        assert seen.text == LONG  # nothing doubled, nothing missing
        assert seen.message is not None and seen.message.seq == stored.seq
        live = [t for t, _ in seen.deltas if t < stored.ts]
        assert live, "no text arrived before the step ended"
    assert len([t for t, _ in from_start.deltas if t < stored.ts]) > 10  # it came piece by piece
    # The late follower got what was written so far in one piece, then the rest.
    first_piece = from_middle.deltas[0][1]
    assert len(first_piece) >= held and LONG.startswith(first_piece)
    assert len(from_middle.deltas) > 2
