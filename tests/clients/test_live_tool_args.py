"""Streamed tool-call arguments through the real daemon over HTTP: "writing file X…" before the call starts.

A scripted model writes a file's content as a tool call's arguments, slowly. A follower there from the start
is told the tool's name before ``tool_call_started`` is stored, and the ``arguments`` pieces of its
``tool_call_delta`` events add up to the stored call's input; one that attaches while the arguments are being
written gets what was written so far in one piece, then the rest: each call's arguments once, whole.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from clients.loom import LiveFollower, LoomClient
from orchestrator.events import EVENT_ADAPTER, AssistantMessage, Event, RunFinished, ToolCallDelta, ToolCallStarted
from tests.clients.cli_support import make_project, write_script
from tests.mcp_calls import call
from tests.orchestrator.daemon.daemon_process import Daemon, mcp_client, running_daemon

pytestmark = pytest.mark.timeout(120)

CONTENT = "".join(f'line {i}: "quoted", back\\slash, ünïcode\n' for i in range(16))
"""About 650 characters of file, some 780 of JSON: 33 pieces of 24, one every 40 ms, so about 1.3 s of writing."""
ARGUMENTS = {"path": "notes/plan.md", "content": CONTENT}
TURNS: list[dict[str, Any]] = [
    {
        "text": "Writing the plan.",
        "tool_calls": [{"name": "fs__write", "arguments": ARGUMENTS}],
        "chunk_chars": 24,
        "chunk_delay_s": 0.04,
    },
    {"text": "Done."},
]
WHOLE = json.dumps(ARGUMENTS)


@dataclass
class Seen:
    """What one follower was given, in order, each event with the wall-clock time it arrived."""

    events: list[tuple[float, Event]] = field(default_factory=list[tuple[float, Event]])
    grew: anyio.Event = field(default_factory=anyio.Event)
    """Set when arguments come (and replaced by a fresh one)."""

    @property
    def pieces(self) -> list[ToolCallDelta]:
        return [e for _, e in self.events if isinstance(e, ToolCallDelta)]

    @property
    def arguments(self) -> str:
        return "".join(p.arguments for p in self.pieces)


async def follow(client: Client, follower: LiveFollower, seen: Seen) -> None:
    """Follow until the run finishes."""
    while True:
        for event in await follower.next(LoomClient(client, on_daemon=True), 10):
            seen.events.append((time.time(), event))
            if isinstance(event, ToolCallDelta):
                seen.grew.set()
                seen.grew = anyio.Event()
            elif isinstance(event, RunFinished):
                return


async def wait_for_arguments(seen: Seen, chars: int) -> None:
    with anyio.fail_after(20):
        while len(seen.arguments) < chars:
            await seen.grew.wait()


async def stored(client: Client, session_id: str) -> list[Event]:
    page = await call(client, "read_events", session_id=session_id)
    return [EVENT_ADAPTER.validate_python(e) for e in page["events"]]


async def drive(daemon: Daemon, project: Path, model: str) -> tuple[list[Event], Seen, Seen, int]:
    from_start, from_middle = Seen(), Seen()
    async with mcp_client(daemon, "auto") as client:
        session = await call(client, "create_session", cwd=str(project), model=model, mode="bypass")
        sid = session["session_id"]
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(follow, client, LiveFollower(sid), from_start)
                await call(client, "send_message", session_id=sid, text="write the plan")
                await wait_for_arguments(from_start, len(WHOLE) // 3)
                held_when_attaching = len(from_start.arguments)
                async with mcp_client(daemon, "auto") as late:
                    await follow(late, LiveFollower(sid), from_middle)
        return await stored(client, sid), from_start, from_middle, held_when_attaching


def test_followers_see_the_tool_named_before_it_starts_and_its_arguments_whole(tmp_path: Path) -> None:
    project, home = make_project(tmp_path / "p"), tmp_path / "home"
    script = write_script(tmp_path / "write.json", TURNS)
    with running_daemon(home, tmp_path) as daemon:
        events, from_start, from_middle, held = anyio.run(drive, daemon, project, f"scripted:{script}")

    message = next(e for e in events if isinstance(e, AssistantMessage) and e.message.tool_uses)
    [use] = message.message.tool_uses
    started = next(e for e in events if isinstance(e, ToolCallStarted))
    assert (started.call_id, started.tool, started.arguments) == (use.id, "fs__write", ARGUMENTS)
    assert (project / "notes" / "plan.md").read_text(encoding="utf-8") == CONTENT

    for seen in (from_start, from_middle):
        assert {p.index for p in seen.pieces} == {0}
        first = seen.pieces[0]
        assert (first.call_id, first.name) == (use.id, "fs__write")
        assert json.loads(seen.arguments) == use.input == started.arguments  # nothing doubled, nothing missing
        # The name came while the arguments were being written: before the call's start was even recorded.
        named_at = next(t for t, e in seen.events if isinstance(e, ToolCallDelta))
        assert named_at < started.ts
        kinds = [type(e) for _, e in seen.events]
        assert kinds.index(ToolCallDelta) < kinds.index(ToolCallStarted)

    assert len([p for p in from_start.pieces if p.arguments]) > 10  # it came piece by piece
    # The late follower got what was written so far in one piece, then the rest.
    caught_up = from_middle.pieces[0].arguments
    assert len(caught_up) >= held and WHOLE.startswith(caught_up)
    assert len(from_middle.pieces) > 2
